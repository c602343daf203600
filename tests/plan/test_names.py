"""plan/names.py: the names a config gives (did-you-mean, known names, unknown keys and hyperparameters named
by their config path, resolved methods and their rollout backend). Expected messages are written out word for word."""

from __future__ import annotations

import pytest

from ttrl_bench.plan import checks


def test_did_you_mean_lists_up_to_three_names_from_a_similarity_of_0_6():
    """difflib's ratio 2M/T: "ttrv-x" (6 letters) against ttrv-xy 12/13 = 0.92, ttrv-xyz 12/14 = 0.86, ttrv-xyzw
    12/15 = 0.80, ttrv-xyzwv 12/16 = 0.75: the best three, best first. At the cutoff: abcdefghij against abcdefxyzw
    shares 6 of 20 letters' pairs, 12/20 = 0.6, listed; against abcdexyzwv 10/20 = 0.5, not. Non-string names compare
    as text ("7" against "17": 2/3)."""
    from ttrl_bench.plan.names import did_you_mean

    assert did_you_mean("ttrv-x", ["ttrv-xyzwv", "ttrv-xyzw", "ttrv-xy", "ttrv-xyz", "other"]) == (
        " (did you mean ttrv-xy or ttrv-xyz or ttrv-xyzw?)")
    assert did_you_mean("abcdefghij", ["abcdefxyzw"]) == " (did you mean abcdefxyzw?)"
    assert did_you_mean("abcdefghij", ["abcdexyzwv"]) == ""
    assert did_you_mean(7, [17, 2]) == " (did you mean 17?)"


def test_check_known_lists_twelve_known_names_and_names_the_command_from_thirteen():
    """Twelve known methods are listed, sorted; thirteen are too many: the command that lists them, with their count.
    Only datasets and methods have such a command: data.sources lists all 45 registry names."""
    from ttrl_bench.datasets.registry import REGISTRY
    from ttrl_bench.plan.names import METHOD_NAMES, check_known

    check_known("methods", ["m11"], [f"m{i:02d}" for i in range(12)])
    with pytest.raises(ValueError) as err:
        check_known("methods", ["zz"], [f"m{i:02d}" for i in reversed(range(12))])
    assert str(err.value) == ("config key `methods`: unknown name(s) 'zz'; known: m00, m01, m02, m03, m04, m05, m06, "
                              "m07, m08, m09, m10, m11")
    with pytest.raises(ValueError) as err:
        check_known("methods", ["zz"], [f"m{i:02d}" for i in range(13)])
    assert str(err.value) == "config key `methods`: unknown name(s) 'zz'; `ttrl-bench methods list` lists the 13 known"
    with pytest.raises(ValueError) as err:
        check_known("methods", ["zero-shot", "ttrvv", "tent2"], METHOD_NAMES)
    assert str(err.value) == ("config key `methods`: unknown name(s) 'ttrvv' (did you mean ttrv?), 'tent2' (did you "
                              f"mean tent?); `ttrl-bench methods list` lists the {len(METHOD_NAMES)} known")
    with pytest.raises(ValueError) as err:
        check_known("data.sources", ["imagenet-z"], REGISTRY)
    assert str(err.value) == ("config key `data.sources`: unknown name(s) 'imagenet-z' (did you mean imagenet-r or "
                              f"imagenet-a or imagenet?); known: {', '.join(sorted(REGISTRY))}")
    assert len(REGISTRY) == 45


def test_check_names_names_each_key_and_skips_disabled_experiments():
    """One wrong name per case, each named by its key; an experiment's cross pairs count as its datasets; a disabled
    experiment's names are not checked; an experiment without models, methods or datasets has none to check."""
    from ttrl_bench.plan.names import check_names

    good = {"datasets": ["demo-digits"], "data": {"sources": {"demo-digits": {}}}, "methods": ["zero-shot", "ttrv"],
            "adaptation": {"method_overrides": {"ttrv": {}}},
            "experiments": {"off": {"enabled": False, "models": ["nobody"], "methods": ["nothing"], "datasets": ["none"]},
                            "bare": {"enabled": True},
                            "x": {"enabled": True, "models": ["demo"], "methods": ["ttrv"], "datasets": ["demo-digits"],
                                  "cross": [["demo-digits", "demo-digit-scenes"]]}}}
    models = {"demo": {}, "other": {}}
    check_names(good, models)
    x = good["experiments"]["x"]

    def experiment_x(**change):  # the disabled experiment first: skipping it must not end the loop
        return {"experiments": {**good["experiments"], "x": {**x, **change}}}

    cases = [
        ({"datasets": ["demo-digitz"]}, "config key `datasets`: unknown name(s) 'demo-digitz' (did you mean demo-digits"),
        ({"data": {"sources": {"demo-digitz": {}}}}, "config key `data.sources`: unknown name(s) 'demo-digitz'"),
        ({"methods": ["ttrvv"]}, "config key `methods`: unknown name(s) 'ttrvv' (did you mean ttrv?)"),
        ({"adaptation": {"method_overrides": {"ttrvv": {}}}},
         "config key `adaptation.method_overrides`: unknown name(s) 'ttrvv' (did you mean ttrv?)"),
        (experiment_x(models=["demo2"]),
         "config key `experiments.x.models`: unknown name(s) 'demo2' (did you mean demo?); known: demo, other"),
        (experiment_x(methods=["ttrvv"]), "config key `experiments.x.methods`: unknown name(s) 'ttrvv'"),
        (experiment_x(cross=[["demo-digits", "demo-digitz"]]),
         "config key `experiments.x.datasets`: unknown name(s) 'demo-digitz'"),
        # demo-digits 20/22 = 0.91, demo-digit-scenes 20/28 = 0.71; the kind is the key's last part: datasets
        (experiment_x(datasets=["demo-digitz"]),
         "config key `experiments.x.datasets`: unknown name(s) 'demo-digitz' (did you mean demo-digits or "
         "demo-digit-scenes?); `ttrl-bench datasets list` lists the 45 known"),
    ]
    for change, message in cases:
        with pytest.raises(ValueError) as err:
            check_names({**good, **change}, models)
        assert str(err.value).startswith(message)


def test_a_rewards_parameters_are_checked_once_named_by_where_they_are_set():
    """An override's reward_params is named by its key, a preset's by the method; the reward's own parameters follow
    (supervised GRPO's gold reward takes none). DARE's `uncertainty` is the GRPO wrapper's, never the reward's: it
    is dropped before the reward is built (so not in the message). A method without a reward (Tent) passes."""
    from ttrl_bench.plan.names import check_reward

    check_reward("tent", {"reward_params": {}}, None)
    dare = {"reward": "dare", "reward_params": {"alpha": 0.5, "tau": 0.05, "uncertainty": "vocab"}}
    check_reward("dare", dare, None)
    cases = [
        ("supervised-grpo", {"reward": "gold", "reward_params": {"x": 1}}, {"reward_params": {"x": 1}},
         "config key `adaptation.method_overrides.supervised-grpo.reward_params`: reward 'gold': bad reward_params "
         "{'x': 1}: <lambda>() got an unexpected keyword argument 'x'; reward 'gold' takes no parameters"),
        ("ttrv", {"reward": "ttrv", "reward_params": {"alpha": 0.75, "bogus": 1}}, None,
         "config key `methods (preset ttrv)`: reward 'ttrv': bad reward_params {'alpha': 0.75, 'bogus': 1}: <lambda>() "
         "got an unexpected keyword argument 'bogus'; reward 'ttrv' takes alpha, entropy, unparsable"),
        ("dare", {**dare, "reward_params": {**dare["reward_params"], "x": 1}}, {"hyperparameters": {}},
         "config key `methods (preset dare)`: reward 'dare': bad reward_params {'alpha': 0.5, 'tau': 0.05, 'x': 1}: "
         "_dare() got an unexpected keyword argument 'x'; reward 'dare' takes alpha, tau, eps"),
    ]
    for method, spec, overrides, message in cases:
        with pytest.raises(ValueError) as err:
            check_reward(method, spec, overrides)
        assert str(err.value) == message


def test_unknown_hyperparameters_are_named_by_their_config_path_first_in_sorted_order():
    """Two typos (zz, n_vote): n_vote, first sorted, is named. The per-task layer is checked against every key of its
    task's presets (grounding's include Tent's `trainable` and MEMO's `memo_form`); a method override against its
    own preset's keys and the optional ones every method takes (TTRV's kl_beta; updates_per_generation, optional).
    zero-shot has no preset: only the optional keys (no epochs). An override of None sets nothing."""
    from ttrl_bench.plan.names import check_hyperparameter_keys

    def layers(hyperparameters=None, overrides=None):
        return {"adaptation": {"hyperparameters": hyperparameters or {}, "method_overrides": overrides or {}}}

    check_hyperparameter_keys(layers({"grounding": {"trainable": "language", "memo_form": "x"}},
                                     {"ttrv": None, "dare": {"reward_params": {}}}))
    with pytest.raises(ValueError) as err:
        check_hyperparameter_keys(layers({"grounding": {"zz": 1, "n_vote": 2}}))
    message = str(err.value)
    assert message.startswith("config key `adaptation.hyperparameters.grounding.n_vote`: unknown hyper-parameter; "
                              "known for grounding methods: advantages, answer_parser, augmentations, ")
    assert ", memo_form, " in message and ", trainable, " in message
    with pytest.raises(ValueError) as err:
        check_hyperparameter_keys(layers(overrides={"ttrv": {"hyperparameters": {"zz": 1, "n_vote": 2}}}))
    message = str(err.value)
    assert message.startswith("config key `adaptation.method_overrides.ttrv.hyperparameters.n_vote`: unknown "
                              "hyper-parameter of ttrv; known: advantages, answer_parser, ")
    assert ", kl_beta, " in message and ", updates_per_generation, " in message
    with pytest.raises(ValueError) as err:
        check_hyperparameter_keys(layers(overrides={"zero-shot": {"hyperparameters": {"epochs": 1}}}))
    message = str(err.value)
    assert message.startswith("config key `adaptation.method_overrides.zero-shot.hyperparameters.epochs`: unknown "
                              "hyper-parameter of zero-shot; known: advantages, ")
    assert ", epochs, " not in message and ", updates_per_generation, " in message


def test_resolved_methods_carry_the_rollout_backend_and_name_a_bad_override():
    """The config's rollout backend goes into every method's hyper-parameters (Tent's too), over its preset's layer;
    a reward_params typo is named by the method's override key (its reward built once, now), and so is an `update`
    override of a method with TRL's standard update (TTRV)."""
    from ttrl_bench.plan.names import resolved_methods

    config = {"adaptation": {"rollout_backend": "vllm", "hyperparameters": {"mcq": {"learning_rate": 1e-5}},
                             "method_overrides": {"ttrv": None}}}
    specs = resolved_methods(config, ["ttrv", "tent"])
    assert (specs["ttrv"]["hyperparameters"]["rollout_backend"], specs["ttrv"]["hyperparameters"]["learning_rate"]) == (
        "vllm", 1e-5)
    assert specs["tent"]["hyperparameters"]["rollout_backend"] == "vllm"
    assert specs["tent"]["hyperparameters"]["learning_rate"] == 5e-7  # the grounding preset's: no mcq layer there
    config["adaptation"]["method_overrides"] = {"ttrv": {"reward_params": {"bogus": 1}}}  # over the preset's three
    with pytest.raises(ValueError) as err:
        resolved_methods(config, ["ttrv"])
    assert str(err.value) == ("config key `adaptation.method_overrides.ttrv.reward_params`: reward 'ttrv': bad "
                              "reward_params {'alpha': 0.75, 'entropy': 'paper', 'unparsable': 'answer', 'bogus': 1}: "
                              "<lambda>() got an unexpected keyword argument 'bogus'; reward 'ttrv' takes alpha, entropy, "
                              "unparsable")
    config["adaptation"]["method_overrides"] = {"ttrv": {"update": {"clip": 1}}}
    with pytest.raises(ValueError) as err:
        resolved_methods(config, ["ttrv"])
    assert str(err.value) == ("config key `adaptation.method_overrides.ttrv`: method 'ttrv' has TRL's standard update: "
                              "no update parameters to override")


def test_a_variant_under_the_other_protocol_keeps_what_the_config_set_itself():
    """authors -> clean: every key at the authors' value (SETTINGS) is dropped and refilled by the schema's defaults
    (chat_template model, choice_parser robust; the adaptation keys have none: absent), while kl_clamp 5.0 (the
    authors' is 10.0) and 16 MCQ tokens (theirs 1,024) were set by hand and stay. clean -> authors (the demo): a key
    at the schema's default (6 MCQ tokens) takes the authors' 1,024; the demo's 64 grounding tokens (the schema's
    1,024) stay instead of the authors' 2,048. The config given is not changed."""
    from ttrl_bench.plan.config import load_config, validated, variant

    demo = load_config(replace=False)
    mcq = {**demo["adaptation"]["hyperparameters"]["mcq"], "kl_clamp": 5.0}
    authors = validated({**demo, "protocol": "authors",
                         "adaptation": {**demo["adaptation"], "hyperparameters": {**demo["adaptation"]["hyperparameters"],
                                                                                  "mcq": mcq}},
                         "evaluation": {**demo["evaluation"], "mcq": {"max_new_tokens": 16, "samples": "all"}}})
    clean = variant(authors, "clean")
    assert clean["protocol"] == "clean" and authors["protocol"] == "authors"
    assert clean["evaluation"]["mcq"] == {"max_new_tokens": 16, "samples": "all", "chat_template": "model",
                                          "choice_parser": "robust"}
    own = {**demo["adaptation"]["hyperparameters"]["mcq"], "kl_clamp": 5.0}  # the demo's own keys and kl_clamp
    assert clean["adaptation"]["hyperparameters"]["mcq"] == own
    assert authors["evaluation"]["mcq"]["chat_template"] == "authors"
    assert authors["adaptation"]["hyperparameters"]["mcq"]["advantages"] == "verl"
    back = variant(demo, "authors")
    assert (back["evaluation"]["mcq"]["max_new_tokens"], back["evaluation"]["grounding"]["max_new_tokens"]) == (1024, 64)
    assert back["adaptation"]["hyperparameters"]["mcq"]["kl_clamp"] == 10.0 and demo["protocol"] == "clean"


def test_the_built_demo_model_runs_only_on_bundled_and_local_datasets():
    """demo-digits is bundled, imagenet and refcocog-train are local copies (registry sources local:...): the built
    model may run on them; ai2d and imagenet-a come from the Hub: named, in the config's order, with the first built
    model. The merge is named only where Snakemake merged --configfile(s) into config/config.yaml (replaced False)."""
    models = {"demo": {"build": "tiny-qwen2.5-vl", "source": "results/models/demo"},
              "demo2": {"build": "tiny-internvl", "source": "results/models/demo2"}, "hub": {"source": "org/model"}}
    checks.check_demo_model_alone(models, ["demo-digits", "imagenet", "refcocog-train"])
    checks.check_demo_model_alone({"hub": models["hub"]}, ["ai2d"], ["mine.yaml"], replaced=False)
    alone = ("config: the built demo model 'demo' (models.demo.build) runs on the bundled demo sets and local datasets "
             "(docs/extending.md), not on ai2d, imagenet-a (Hub or paper datasets): give those a model with a `source`")
    merged = (". config/ttrv.yaml, x.yaml was merged into config/config.yaml, whose demo model came along; add "
              "--replace-workflow-config to run it alone")
    for configfiles, replaced, message in [((), None, alone), (["config/ttrv.yaml", "x.yaml"], True, alone),
                                           (["config/ttrv.yaml", "x.yaml"], None, alone), ((), False, alone),
                                           (["config/ttrv.yaml", "x.yaml"], False, alone + merged)]:
        with pytest.raises(ValueError) as err:
            checks.check_demo_model_alone(models, ["demo-digits", "ai2d", "imagenet-a"], configfiles, replaced)
        assert str(err.value) == message
