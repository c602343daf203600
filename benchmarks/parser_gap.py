"""How much of a score is answer format: the TTRV authors' own logged responses scored by their parser and by ours.

Their verl logs (Akshit21112002/TTRV verl/logs, a clone's or a flat folder of the .log files) print sample
`[prompt]` / `[response]` pairs of their runs. Each prompt is matched to the item of their lists it came from
(its text after the image is the item's prompt after "<image>"), whose answer is the gold; the response is then
scored by their parser and grading (evaluation/extraction.py `authors_answer`, `authors_correct`) and by ours
(`extract_choice`, `short_answers_match`). Prints a table per dataset; `--out` writes it as Markdown too.

    python benchmarks/parser_gap.py path/to/TTRV/verl/logs --out benchmarks/results/parser_gap.md
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

import pandas as pd

from ttrl_bench.datasets import authors_items
from ttrl_bench.evaluation.extraction import authors_answer, authors_correct, extract_choice, short_answers_match
from ttrl_bench.results.tables import to_markdown

RAY_PREFIX = re.compile(r"^(?:\x1b\[\d+m)?\(\w+ pid=\d+\)(?:\x1b\[0m)? ?", re.MULTILINE)
BLOCK = re.compile(r"^\[prompt\] (.*?)^\[response\] (.*?)(?=^\[\w+\] )", re.MULTILINE | re.DOTALL)
END_TOKENS = re.compile(r"(<\|im_end\|>|<\|endoftext\|>)+\s*$")


def dataset_of(log: Path) -> str | None:
    """Our dataset name from the log's file name (ai2d_20_..., resi45_500_..., imagenet_a_biased_20_...)."""
    folders = {block["authors_folder"]: name for name, block in authors_items.INDEX["datasets"].items()}
    return next((folders[f] for f in sorted(folders, key=len, reverse=True) if log.name.startswith(f + "_")), None)


def gold_by_text(dataset: str) -> dict[str, str]:
    """The item text after "<image>" -> the answer, over every shipped list of the dataset."""
    golds = {}
    for name, entry in authors_items.INDEX["datasets"][dataset]["lists"].items():
        if authors_items.list_path(dataset, name).exists():
            for item in authors_items.load_list(dataset, name):
                golds[item["prompt"].split("<image>", 1)[-1]] = str(item["answer"])
    return golds


def logged_pairs(log: Path) -> list[tuple[str, str]]:
    """(the prompt's text after the image, the response) of every logged pair."""
    text = RAY_PREFIX.sub("", log.read_text(errors="replace"))
    pairs = []
    for prompt, response in BLOCK.findall(text):
        after_image = prompt.split("</img>", 1)[-1].split("<|vision_end|>", 1)[-1]
        pairs.append((after_image.split("<|im_end|>", 1)[0], END_TOKENS.sub("", response.rstrip("\n"))))
    return pairs


def gap(logs: Path) -> pd.DataFrame:
    rows, kinds = [], Counter()
    cache: dict[str, dict] = {}
    for log in sorted(logs.rglob("*.log")):
        dataset = dataset_of(log)
        if dataset is None:
            continue
        golds = cache.setdefault(dataset, gold_by_text(dataset))
        for text, response in logged_pairs(log):
            gold = golds.get(text)
            if gold is None:
                continue
            options = authors_items.item_options("<image>" + text)
            ours = short_answers_match(extract_choice(response, options), gold)
            theirs = authors_correct(authors_answer(response), gold)
            rows.append({"dataset": dataset, "ours": ours, "theirs": theirs})
            if ours != theirs:
                kinds[(dataset, response.strip()[:40])] += 1
    frame = pd.DataFrame(rows)
    table = frame.groupby("dataset").agg(responses=("ours", "size"), ours=("ours", "mean"), theirs=("theirs", "mean"),
                                         differ=("ours", "size"))
    table["differ"] = frame.assign(d=frame["ours"] != frame["theirs"]).groupby("dataset")["d"].sum()
    table[["ours", "theirs"]] *= 100
    table["theirs - ours"] = table["theirs"] - table["ours"]
    table.attrs["examples"] = kinds.most_common(8)
    return table.reset_index()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", type=Path, help="the TTRV authors' verl/logs (a clone's), or a folder of their .log files")
    parser.add_argument("--out", type=Path, help="also write the table as Markdown here")
    args = parser.parse_args()
    table = gap(args.logs)
    text = to_markdown(table, index=False)
    examples = "\n".join(f"- {dataset}: {response!r} x{n}" for (dataset, response), n in table.attrs["examples"])
    print(text + "\nMost frequent responses the two parsers score differently:\n" + examples)
    if args.out:
        args.out.write_text(
            "# The TTRV authors' logged responses scored by their parser and by ours\n\n"
            "`python benchmarks/parser_gap.py <TTRV clone>/verl/logs` (Akshit21112002/TTRV @b9cf778; responses whose "
            "prompt matches an item of their shipped lists; ours / theirs in % correct). Rollouts and validation "
            "samples alike, as their logs print them.\n\n" + text
            + "\nMost frequent responses the two parsers score differently:\n\n" + examples + "\n")


if __name__ == "__main__":
    main()
