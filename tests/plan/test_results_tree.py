"""plan/results_tree.py: one results tree per config, the config files named as Snakemake was given them,
and the guard's message when another config claimed the tree. Expected values are worked by hand in each docstring."""

from __future__ import annotations

import pytest

from ttrl_bench.plan.results_tree import check_results_tree, claim_results_tree, config_files


# the guard's last words: Snakemake's --configfile swallows targets written after it (issue 57)
TRAP = "; targets go before --configfile, which takes every file name after it as a config file)"


def test_config_files_are_named_relative_to_the_working_directory_unless_outside_it(tmp_path, monkeypatch):
    """From tmp/work: `sub/../a.yaml` is a.yaml; ../other.yaml lies outside the working directory, so it is kept
    absolute (a relative ../ would name another file from another directory); the embedded default comes first
    unless --replace-workflow-config."""
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    outside = str(tmp_path / "other.yaml")
    assert config_files(["sub/../a.yaml", outside], replaced=True) == ["a.yaml", outside]
    assert config_files([outside], replaced=False) == ["config/config.yaml", outside]
    assert config_files([], replaced=True) == []


def test_a_results_tree_claimed_by_another_config_names_both_and_the_command(tmp_path, monkeypatch):
    """The claim: the first run's files as indented JSON (indent 1), in a results directory created with its
    parents, or in one that exists already without a claim. The message joins each side's files with " + " ("no
    config file" for a run with none); its command repeats every --configfile but the embedded default, and asks
    for --replace-workflow-config only where the default is not among the files."""
    monkeypatch.chdir(tmp_path)
    claim_results_tree("runs/a/results", ["config/config.yaml", "extra.yaml"])  # runs/a/ does not exist yet
    assert (tmp_path / "runs/a/results/config_files.json").read_text() == (
        '{\n "config_files": [\n  "config/config.yaml",\n  "extra.yaml"\n ]\n}\n')
    with pytest.raises(ValueError) as err:
        check_results_tree("runs/a/results", [])
    assert str(err.value).startswith(
        "runs/a/results/ holds the results of config config/config.yaml + extra.yaml (runs/a/results/config_files.json);"
        " a run of no config file here would replace its store, tables and figures.")
    assert str(err.value).endswith(" --replace-workflow-config (or move runs/a/results/ away" + TRAP)

    (tmp_path / "results").mkdir()  # an existing directory without a claim: claimed
    claim_results_tree("results", ["config/ttrv.yaml"])
    with pytest.raises(ValueError) as err:
        check_results_tree("results", ["config/config.yaml", "extra.yaml"])
    assert str(err.value) == (
        "results/ holds the results of config config/ttrv.yaml (results/config_files.json); a run of "
        "config/config.yaml + extra.yaml here would replace its store, tables and figures. Run it in a directory of "
        "its own: snakemake --directory runs/<name> --configfile extra.yaml (or move results/ away" + TRAP)
