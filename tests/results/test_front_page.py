"""results/README.md, the results' front page (results/front_page.py, issue 57): what ran, each published table's
cells, the headline rows, the figures embedded and the long tables linked, within 60 lines of 120 characters."""

import json

from PIL import Image

from tests.support.results import _eval_dir
from ttrl_bench.cli import main
from ttrl_bench.results.store import ingest


def _render(tmp_path, runs, **files):
    """`render-tables` with its front page into tmp_path/results, as the workflow's rule calls it; `files`: the
    figures and tables other rules wrote there first."""
    results = tmp_path / "results"
    results.mkdir()
    for path in files.values():
        (results / path).parent.mkdir(parents=True, exist_ok=True)
        if path.endswith(".png"):
            Image.new("RGB", (8, 8)).save(results / path)
        else:
            (results / path).write_text("x\n")
    (results / "config_files.json").write_text(json.dumps({"config_files": ["config/config.yaml", "mine.yaml"]}))
    dirs = [_eval_dir(tmp_path / "eval", *run) for run in runs]
    ingest(results / "benchmark.duckdb", dirs, [], [])
    names = ["--model-names", json.dumps({"m2b": "InternVL3-2B"}), "--dataset-names",
             json.dumps({"imagenet-a": "ImageNet-A"})]
    assert main(["render-tables", "--db", str(results / "benchmark.duckdb"), "--out-dir", str(results / "tables"),
                 "--front-page", str(results / "README.md"), *names]) == 0
    return (results / "README.md").read_text()


def test_the_front_page_says_what_ran_what_agrees_and_where_everything_is(tmp_path):
    """InternVL3-2B on ImageNet-A (200 items each): zero-shot 67.92, the published cell exactly (agrees); TTRV 60.0
    against the published 96.31 (differs). Of TTRV Table 1's 126 cells 2 ran, 1 agrees, 1 differs, 124 not run;
    Table 9 (adaptation set sizes, 48 cells) holds the same two 20-sample cells.
    The headline: the zero-shot row, "w/ TTRV" and its Δ (60 - 67.92 = -7.92). The figure written is embedded,
    the one not written is not named; claims.md, written, is linked."""
    page = _render(tmp_path, [("m2b", "zero-shot", "none", "imagenet-a", 20, {"accuracy": 67.92}),
                              ("m2b", "ttrv", "imagenet-a", "imagenet-a", 20, {"accuracy": 60.0})],
                   accuracy="figures/accuracy.png", claims="tables/claims.md")
    lines = page.splitlines()
    assert len(lines) <= 60 and max(map(len, lines)) <= 120
    assert ("Config config/config.yaml + mine.yaml: 2 evaluations (1 zero-shot), 1 adaptations. Models (1): m2b. "
            "Methods (2): ttrv, zero-shot.") in " ".join(lines)
    assert "Datasets (1, items evaluated): imagenet-a (200)." in " ".join(lines)
    assert "| [ttrv 1](tables/ttrv_table1.md) | 126 | 2 | 1 | 1 | 124 |" in lines
    assert "| [ttrv 9](tables/ttrv_table9.md) | 48 | 2 | 1 | 1 | 46 |" in lines
    assert "## Published cells: 2 agree, 2 differ, 583 not run of 587 (agree: the paper's value in our 95% interval)" in lines
    assert sum(line.startswith("| [") for line in lines) == 21  # every published table, each linked
    assert "| m2b | 67.92 | 67.92 |" in lines and "| Δ TTRV | -7.92 | -7.92 |" in lines
    assert "![accuracy per dataset and method (ticks: the published values)](figures/accuracy.png)" in lines
    assert "step_costs" not in page
    assert "- [claims.md](tables/claims.md): the papers' claims against our runs" in lines
    for target in [part.split(")")[0] for part in page.split("](")[1:]]:
        assert (tmp_path / "results" / target).exists(), target


def test_with_no_claim_run_the_front_page_has_no_claims_section_and_an_empty_store_says_so(tmp_path):
    page = _render(tmp_path, [])
    # render-tables always writes claims.md (every claim "not run"), so it is linked; no section counts verdicts
    assert "## The papers' claims" not in page and "not run of 16 claims" not in page
    assert "- [claims.md](tables/claims.md): the papers' claims against our runs" in page.splitlines()
    assert "Config config/config.yaml + mine.yaml: nothing evaluated yet." in page
    assert "## Published cells: 0 agree, 0 differ, 587 not run of 587 (agree" in page
    assert "| [ttrv 1](tables/ttrv_table1.md) | 126 | 0 | 0 | 0 | 126 |" in page


def test_the_markdown_comparison_shows_the_cells_that_ran_with_the_columns_a_reader_needs(tmp_path):
    """ttrv_table1_layout.md's published-vs-ours section: the two cells that ran, ten columns; the 124 not run and
    every provenance column stay in ttrv_table1_vs_published.csv (126 rows)."""
    import pandas as pd

    _render(tmp_path, [("m2b", "zero-shot", "none", "imagenet-a", 20, {"accuracy": 67.92}),
                       ("m2b", "ttrv", "imagenet-a", "imagenet-a", 20, {"accuracy": 60.0})])
    tables = tmp_path / "results/tables"
    section = (tables / "ttrv_table1_layout.md").read_text().split("# TTRV Table 1: published vs ours", 1)[1]
    section = section.split("\n# ", 1)[0]  # up to the next table
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0] == "| model | method | dataset | metric | paper_value | ours | low | high | delta | status |"
    assert [row.split(" | ")[:2] + row.split(" | ")[-1:] for row in rows[1:3]] == [
        ["| InternVL3-2B", "zero-shot", "agrees |"], ["| InternVL3-2B", "ttrv", "differs |"]]
    assert "(1 of 126 cells agree; 124 not run;" in section and len(rows) == 3  # the header, two cells
    full = pd.read_csv(tables / "ttrv_table1_vs_published.csv")
    assert len(full) == 126 and "log_file" in full.columns


def test_a_page_that_would_run_past_60_lines_lists_the_tables_nothing_ran_in_on_one_line(tmp_path):
    """21 tables of which 2 ran, 120 datasets (a paragraph of 24 lines) and 30 rows of Table 1's layout: the 19
    idle tables shrink to one line of links, the two that ran keep their rows, and the page fits."""
    import pandas as pd

    from ttrl_bench.results.front_page import front_page

    tables = [("ttrv", n) for n in range(1, 15)] + [("echo", n) for n in range(1, 8)]
    ran = {("ttrv", 1): (1, 0), ("ttrv", 2): (0, 1)}  # (agrees, differs)
    fidelity = pd.DataFrame([{"paper": p, "table": t, "cells": 10, "agrees": ran.get((p, t), (0, 0))[0],
                              "differs": ran.get((p, t), (0, 0))[1], "not_run": 10 - ((p, t) in ran)} for p, t in tables])
    fidelity = pd.concat([fidelity, pd.DataFrame([{"paper": "total", "table": "", "cells": 210, "agrees": 2,
                                                   "differs": 2, "not_run": 206}])], ignore_index=True)
    runs = pd.DataFrame([{"run_id": f"r{i}", "model": "m", "method": "zero-shot", "train_dataset": "none",
                          "target_dataset": f"dataset-{i:03d}", "n": 100, "n_adapt": "20", "sampling": "random",
                          "seed": 0, "protocol": "clean"} for i in range(120)])
    table1 = pd.DataFrame({"d": [1.0] * 30, "Mean": [1.0] * 30}, index=pd.Index([f"r{i}" for i in range(30)],
                                                                                  name="Model"))
    claims = ["## The papers' claims, tested", "", "6 supported, 0 contradicted, 2 not resolved, 8 not run of 16 "
              "claims, each paired over the same items and seeds:", "[claims.md](tables/claims.md)", ""]
    lines = front_page(runs, fidelity, table1, tmp_path, [], claims).splitlines()
    assert len(lines) <= 60 and max(map(len, lines)) <= 120
    assert lines[lines.index(claims[0]):lines.index(claims[0]) + 5] == claims  # the claims' section, whole
    assert [line.split(" | ")[0] for line in lines if line.startswith("| ") and "cells" not in line][:2] == [
        "| ttrv 1", "| ttrv 2"]
    idle = " ".join(lines[lines.index("| ttrv 2 | 10 | 1 | 0 | 1 | 9 |") + 1:]).split(".")[0]
    assert idle.startswith("No cell run in 19 tables: ttrv 3, ttrv 4,") and idle.endswith("echo 6, echo 7")
    assert "(19 more rows: the layout table)" in lines  # not linked: no such file in tmp_path
