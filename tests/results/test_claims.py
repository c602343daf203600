"""The papers' claims (results/claims_registry.py, claims.py, claims_report.py): the registry covers every paper
with a citation and checks its rows; runs pair on the same items and seeds; the figure's data has one point
per claim and cell with the paper's difference where it has one."""

import json
import math

import pandas as pd
import pytest

from ttrl_bench.results.claims import analyse, figure_points, item_scores, pair_runs, published_differences
from ttrl_bench.results.claims_registry import CLAIMS_CSV, PAPERS, load_claims
from ttrl_bench.results.claims_report import claims_markdown, claims_section
from ttrl_bench.results.store import PUBLISHED_CSV, ingest, read_table

PUBLISHED = pd.read_csv(str(PUBLISHED_CSV))
REGISTRY = load_claims(published=PUBLISHED)
CLAIM = {row["claim"]: row for row in REGISTRY.to_dict("records")}


def test_registry_covers_every_paper_and_the_issues_claims_each_citing_where():
    assert set(REGISTRY["paper"]) == set(PAPERS) == {"ttrv", "vr-ttrl", "echo", "dare", "t3rl"}
    arms = {(r["paper"], r["method"], r["baseline"]) for r in CLAIM.values()}
    assert {
        ("ttrv", "ttrv", "zero-shot"), ("ttrv", "ttrv", "ttrl-majority"),  # vs base, vs TTRL (Table 3)
        ("ttrv", "ttrv", "ttrv-no-frequency"), ("ttrv", "ttrv", "ttrv-no-diversity"),  # Table 3's ablations
        ("ttrv", "ttrv", "random-reward"),  # Table 5's random-reward control
        ("vr-ttrl", "vr-ttrl", "zero-shot"), ("vr-ttrl", "vr-ttrl-anti-consensus", "zero-shot"),  # Tables 2, 3
        ("vr-ttrl", "vr-ttrl", "vote-only"),  # vote-only vs update (Table 2)
        ("echo", "echo", "mm-upt"), ("echo", "echo", "zero-shot"),  # Table 2
        ("dare", "dare", "ttrl-majority"), ("t3rl", "t3rl", "ttrl-majority"),
    } <= arms
    for row in CLAIM.values():
        assert any(word in row["citation"] for word in ("Section", "Table", "abstract")), row["claim"]
    # the text-math papers have no published.csv rows: their claims cite the text and name its numbers
    assert CLAIM["dare-vs-ttrl"]["tables"] == "" and "25.3%" in CLAIM["dare-vs-ttrl"]["published_magnitude"]
    # the numbers the papers' text gives (TTRV abstract; VR-TTRL Section 4.4)
    assert "52.4%" in CLAIM["ttrv-vs-base"]["published_magnitude"]
    assert "+10.96%" in CLAIM["vr-ttrl-vs-vote-only"]["published_magnitude"]


def _write(tmp_path, **changes):
    frame = pd.read_csv(str(CLAIMS_CSV), dtype=str, keep_default_na=False)
    for field, value in changes.items():
        frame.loc[1, field] = value  # the second claim: line 3 of the file
    path = tmp_path / "claims.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("changes, message", [
    ({"direction": "up"}, "field direction: 'up' one of"),
    ({"metric": "bleu"}, "field metric: 'bleu' one of"),
    ({"baseline": "ttrl"}, "field baseline: 'ttrl' not a method"),
    ({"citation": "TTRV somewhere"}, "field citation: 'TTRV somewhere' names no Section"),
    ({"tables": "ttrv:99"}, "field tables: 'ttrv:99' is not a published table"),
    ({"tables": "echo:2"}, "field tables: 'echo:2' is another paper's table"),
    ({"baseline": "ttrv-no-diversity", "tables": "ttrv:5"}, "field baseline: 'ttrv-no-diversity' has no cell in ttrv:5"),
    ({"protocol": "twenty"}, "field protocol: 'twenty'"),
    ({"statement": ""}, "field statement: empty"),
    ({"baseline": "ttrv"}, "fields method and baseline: the same arm"),
])
def test_a_bad_row_is_named_by_file_line_claim_and_field(tmp_path, changes, message):
    path = _write(tmp_path, **changes)
    with pytest.raises(ValueError, match=f"{path}: line 3 \\(claim ttrv-vs-ttrl\\): {message}"):
        load_claims(path, PUBLISHED)


def test_a_missing_column_and_a_repeated_claim_are_named(tmp_path):
    path = tmp_path / "claims.csv"
    pd.read_csv(str(CLAIMS_CSV), dtype=str, keep_default_na=False).drop(columns=["direction"]).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"claims.csv: missing column\(s\) \['direction'\]"):
        load_claims(path, PUBLISHED)
    path = _write(tmp_path, claim="ttrv-vs-base")
    with pytest.raises(ValueError, match=r"claim id\(s\) \['ttrv-vs-base'\] repeated"):
        load_claims(path, PUBLISHED)


def test_published_differences_read_from_the_papers_tables():
    table3 = published_differences(CLAIM["ttrv-vs-ttrl"], PUBLISHED).set_index("dataset")["difference"]
    # TTRV Table 3: TTRV 66.94 / 61.14 / 61.09 against majority voting 65.08 / 58.37 / 47.52
    assert table3.round(2).to_dict() == {"MathVista": 1.86, "SEED": 2.77, "AI2D": 13.57}
    base = published_differences(CLAIM["ttrv-vs-base"], PUBLISHED).set_index(["model", "dataset"])["difference"]
    assert round(base[("InternVL3-2B", "ImageNet")], 2) == 42.31  # Table 1's printed delta, 98.31 - 56.00
    # ECHO Table 2, Qwen2.5-VL-7B on MathVision: ECHO 28.1 vs MM-UPT 27.3 trained on Geometry3k (+0.8)
    echo = published_differences(CLAIM["echo-vs-mm-upt"], PUBLISHED).set_index(["model", "dataset", "train"])
    assert round(echo.loc[("Qwen2.5-VL-7B", "MathVision", "Geometry3k"), "difference"], 2) == 0.8
    assert len(echo) == 16  # 2 models x 4 datasets x 2 training sets; the Mean column left out
    # VR-TTRL Table 3: the anti-consensus row below VisionReasoner-7B's base (60.68 vs 66.08), above Qwen's
    anti = published_differences(CLAIM["anti-consensus-vs-base"], PUBLISHED).set_index(["model", "dataset"])["difference"]
    assert round(anti[("VisionReasoner-7B", "ReasonSeg-val")], 2) == -5.40
    assert round(anti[("Qwen2.5-VL-7B", "ReasonSeg-val")], 2) == 7.58
    assert published_differences(CLAIM["t3rl-vs-ttrl"], PUBLISHED).empty


def _run(run_id, method, seed=0, train="digits", model="demo", target="digits", metric="accuracy"):
    return {"run_id": run_id, "model": model, "method": method, "train_dataset": train, "target_dataset": target,
            "n_adapt": "20", "sampling": "random", "seed": seed, "metric": metric, "items": "ours", "protocol": "clean"}


def _predictions(run_id, right, ids=None):
    ids = ids if ids is not None else [f"i{k}" for k in range(len(right))]
    return pd.DataFrame({"run_id": run_id, "id": ids, "correct": right})


# TTRV right on items 0-5 where the base model is wrong; both right on 6, both wrong on 7
TTRV_RIGHT = [True] * 6 + [True, False]
BASE_RIGHT = [False] * 6 + [True, False]


def test_one_seed_of_accuracy_is_decided_by_mcnemar():
    runs = pd.DataFrame([_run("z", "zero-shot", train="none"), _run("t", "ttrv")])
    predictions = pd.concat([_predictions("z", BASE_RIGHT), _predictions("t", TTRV_RIGHT)])
    claims, cells = analyse(runs, predictions, PUBLISHED, registry=REGISTRY)
    row = claims.set_index("claim").loc["ttrv-vs-base"]
    # 6 of 8 items gained: +75 points; McNemar 6 vs 0 discordant, p = 2 / 2^6
    assert (row["difference"], row["only_arm"], row["only_baseline"], row["p"]) == (75.0, 6, 0, pytest.approx(1 / 32, rel=1e-12))
    assert (row["test"], row["verdict"], row["seeds"], row["items"], row["tested"]) == (
        "McNemar exact", "supported", 1, 8, "demo/digits")
    assert math.isnan(row["seed_sd"])  # one seed: no spread
    assert set(claims.loc[claims["claim"] != "ttrv-vs-base", "verdict"]) == {"not run"}
    assert cells["claim"].tolist() == ["ttrv-vs-base"]


def test_arms_pair_on_the_items_both_scored():
    # the base model scored items 0-7, TTRV items 2-9: the pair holds items 2-7 (TTRV gains 2-5: 4 of 6)
    runs = pd.DataFrame([_run("z", "zero-shot", train="none"), _run("t", "ttrv")])
    predictions = pd.concat([_predictions("z", BASE_RIGHT),
                             _predictions("t", TTRV_RIGHT[2:] + [True, True], [f"i{k}" for k in range(2, 10)])])
    row = analyse(runs, predictions, PUBLISHED, registry=REGISTRY)[0].set_index("claim").loc["ttrv-vs-base"]
    assert (row["items"], row["only_arm"], row["only_baseline"]) == (6, 4, 0)
    assert row["difference"] == pytest.approx(400 / 6)


def test_runs_pair_only_on_the_same_seed_and_in_domain():
    runs = pd.DataFrame([_run("z", "zero-shot", seed=1, train="none"), _run("t", "ttrv", seed=0),
                         _run("x", "ttrv", seed=1, train="other")])  # cross-dataset: not the claim's arm
    assert pair_runs(CLAIM["ttrv-vs-base"], runs).empty


def test_seeds_give_the_spread_and_the_bootstrap_decides():
    # seed 0: +75 (as above); seed 1: TTRV gains items 0-1 only: +25. Mean +50, sample sd of (75, 25) = 35.36
    runs = pd.DataFrame([_run("z0", "zero-shot", 0, "none"), _run("t0", "ttrv", 0),
                         _run("z1", "zero-shot", 1, "none"), _run("t1", "ttrv", 1)])
    predictions = pd.concat([_predictions("z0", BASE_RIGHT), _predictions("t0", TTRV_RIGHT),
                             _predictions("z1", BASE_RIGHT), _predictions("t1", [True] * 2 + [False] * 4 + [True, False])])
    row = analyse(runs, predictions, PUBLISHED, registry=REGISTRY)[0].set_index("claim").loc["ttrv-vs-base"]
    assert (row["difference"], row["seeds"], row["test"]) == (50.0, 2, "paired bootstrap")
    assert row["seed_sd"] == pytest.approx(50 / math.sqrt(2))
    assert row["low"] > 0 and row["verdict"] == "supported"


def test_giou_per_item_is_intersection_over_union_and_zero_without_union():
    predictions = pd.DataFrame({"id": ["a", "b", "c"], "intersection": [1, 0, 3], "union": [4, 0, 3],
                                "correct": [True, False, True]})
    label, scores = item_scores(predictions, "giou", "box_giou")
    assert label == "box_giou" and scores.tolist() == [25.0, 0.0, 100.0]
    assert item_scores(predictions, "count_acc", "box_giou")[1].tolist() == [100.0, 0.0, 100.0]
    assert item_scores(predictions, "acc", "box_giou") is None  # an accuracy claim reads no grounding run


def test_figure_data_has_one_point_per_claim_and_cell_with_the_published_value_where_one_exists():
    # one run pair on the demo's digits (no published cell) and one on InternVL2.5-4B / SEED, a cell of TTRV's
    # Table 2 (61.14 - 57.37 = +3.77) and Table 5 (random reward 52.41: TTRV - random = +8.73)
    runs = pd.DataFrame([_run("z", "zero-shot", train="none"), _run("t", "ttrv"), _run("r", "random-reward"),
                         _run("zs", "zero-shot", train="none", model="internvl2.5-4b", target="seed-bench"),
                         _run("ts", "ttrv", train="seed-bench", model="internvl2.5-4b", target="seed-bench"),
                         _run("rs", "random-reward", train="seed-bench", model="internvl2.5-4b", target="seed-bench")])
    predictions = pd.concat([_predictions(r, right) for r, right in
                             (("z", BASE_RIGHT), ("t", TTRV_RIGHT), ("r", BASE_RIGHT),
                              ("zs", BASE_RIGHT), ("ts", TTRV_RIGHT), ("rs", BASE_RIGHT))])
    claims, cells = analyse(runs, predictions, PUBLISHED, {"internvl2.5-4b": "InternVL2.5-4B"}, {"seed-bench": "SEED"},
                            REGISTRY)
    points = figure_points(claims, cells)
    assert sorted(zip(points["claim"], points["label"].str.split("\n").str[1])) == sorted(
        (claim, f"{model} / {dataset} (accuracy, 1 x 8 items)") for claim in ("ttrv-vs-base", "ttrv-vs-random", "random-vs-base")
        for model, dataset in (("demo", "digits"), ("internvl2.5-4b", "seed-bench")))
    assert (points["low"] <= points["difference"]).all() and (points["difference"] <= points["high"]).all()
    published = {(c, label.split("\n")[1].split(" / ")[0]): p
                 for c, label, p in zip(points["claim"], points["label"], points["published"])}
    assert published[("ttrv-vs-base", "internvl2.5-4b")] == pytest.approx(3.77)
    assert published[("ttrv-vs-random", "internvl2.5-4b")] == pytest.approx(8.73)
    assert published[("random-vs-base", "internvl2.5-4b")] == pytest.approx(-4.96)
    assert points.loc[points["label"].str.contains("demo"), "published"].isna().all()
    # every claim's point carries the range of the paper's own cells (Table 5: +8.73, +10.21 for TTRV - random)
    random = points[points["claim"] == "ttrv-vs-random"].iloc[0]
    assert (random["paper_low"], random["paper_high"]) == pytest.approx((8.73, 10.21))


def test_claims_md_has_one_row_per_claim_and_says_what_one_seed_shows():
    runs = pd.DataFrame([_run("z", "zero-shot", train="none"), _run("t", "ttrv")])
    predictions = pd.concat([_predictions("z", BASE_RIGHT), _predictions("t", TTRV_RIGHT)])
    text = claims_markdown(*analyse(runs, predictions, PUBLISHED, registry=REGISTRY))
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| claim")]
    assert [row.split(" | ")[0][2:] for row in rows] == REGISTRY["claim"].tolist()
    assert "One seed on 8 digits items shows whether" in text and "1 supported, 15 not run of 16 claims" in text
    assert "| +75.00 |" in rows[0] and "McNemar exact: 6 vs 0 discordant, p = 0.031" in rows[0]


def test_ingest_writes_the_claims_tables_and_the_front_page_section(tmp_path):
    dirs = []
    for run_id, method, train, right in (("z", "zero-shot", "none", BASE_RIGHT), ("t", "ttrv", "digits", TTRV_RIGHT)):
        d = tmp_path / run_id
        d.mkdir()
        metrics = {**_run(run_id, method, train=train), "value": 0.0, "metrics": {"accuracy": 0.0}, "n": 8,
                   "n_unparsable": 0, "eval_seconds": 0.1, "config_hash": "x", "git_revision": "y", "versions": {}}
        (d / "metrics.json").write_text(json.dumps(metrics))
        _predictions(run_id, right).drop(columns="run_id").to_parquet(d / "predictions.parquet")
        dirs.append(d)
    db = tmp_path / "b.duckdb"
    counts = ingest(db, dirs, [], [])
    assert (counts["claims"], counts["claim_cells"]) == (len(REGISTRY), 1)
    assert read_table(db, "claims").set_index("claim").loc["ttrv-vs-base", "verdict"] == "supported"
    section = claims_section(db)
    # only TTRV vs zero-shot has both arms here: 1 supported, the registry's other claims not run
    assert section == ["## The papers' claims, tested", "",
                       f"1 supported, 0 contradicted, 0 not resolved, {len(REGISTRY) - 1} not run of {len(REGISTRY)} "
                       "claims, each paired over the same items and seeds:",
                       "[claims.md](tables/claims.md), [figure](figures/claims.png)", ""]


def test_a_giou_claim_is_decided_by_the_bootstrap_even_when_every_overlap_is_zero():
    # the demo model's boxes miss every digit before and after VR-TTRL (docs/demo.md): gIoU 0 on each of 4
    # scenes for both arms, so the difference is 0 with a zero-width interval: not resolved, no McNemar
    runs = pd.DataFrame([_run("z", "zero-shot", train="none", target="scenes", metric="box_giou"),
                         _run("v", "vr-ttrl", train="scenes", target="scenes", metric="box_giou")])
    grounding = {"id": ["a", "b", "c", "d"], "intersection": [0] * 4, "union": [9] * 4, "correct": [False] * 4}
    predictions = pd.concat([pd.DataFrame({"run_id": r, **grounding}) for r in ("z", "v")])
    claims = analyse(runs, predictions, PUBLISHED, registry=REGISTRY)[0].set_index("claim")
    row = claims.loc["vr-ttrl-vs-base"]
    assert (row["difference"], row["low"], row["high"], row["test"], row["verdict"]) == (
        0.0, 0.0, 0.0, "paired bootstrap", "not resolved")
    # the same runs' counts (0 right of 4 either way) are 0/1 scores: McNemar, no discordant pair, p = 1
    counting = claims.loc["vr-ttrl-vs-base-counting"]
    assert (counting["test"], counting["p"], counting["verdict"]) == ("McNemar exact", 1.0, "not resolved")
