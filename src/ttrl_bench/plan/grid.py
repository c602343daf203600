"""The job grid of a config: every evaluation run (models x methods x datasets x seeds of the main
grid plus every enabled experiment, e.g. TTRV Table 3), the adaptations they need, and each job's
resolved settings (the method preset with the config's overrides, the evaluation options).

Layer 2 of the plan (grid: what jobs): imports the config layer only (docs/DESIGN.md "The plan's layers")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..adaptation.presets import METHOD_NAMES, is_per_sample, method_task
from ..datasets.registry import REGISTRY
from ..evaluation.tasks import task_for
from ..runs.path_levels import protocol_name, protocol_parts, rerun_protocol
from .config import variant
from .names import check_names, resolved_methods

BUILD_FAMILY = {"tiny-qwen2.5-vl": "qwen2_5_vl", "tiny-internvl": "internvl"}  # models.<name>.build
DEMO_DATASETS = ["demo-digits", "demo-digit-scenes"]  # what build_demo_model trains on


class Run(NamedTuple):
    """One evaluation: zero-shot rows have train "none"; a `cross` pair adapts on train and
    evaluates on target (TTRV Table 12)."""

    model: str
    method: str
    train: str
    target: str
    protocol: str
    seed: int


@dataclass(frozen=True)
class Job:
    """One GPU job of the workflow, named by its rule and wildcards (`dataset` of an adaptation
    is the train set; `target` only for evaluations)."""

    rule: str
    model: str
    method: str | None = None
    dataset: str | None = None
    target: str | None = None
    protocol: str | None = None
    seed: int | None = None

    @classmethod
    def of(cls, rule: str, wildcards) -> "Job":
        """The job of a rule from Snakemake's wildcards (any mapping-like with attributes)."""
        get = lambda name: getattr(wildcards, name, None)  # noqa: E731
        return cls(rule, get("model"), get("method"), get("dataset") or get("train"), get("target"),
                   get("protocol"), None if get("seed") is None else int(get("seed")))


def adaptation_samples(protocol: str) -> int | None:
    """The protocol's adaptation samples; None for "all" (known once the dataset is prepared)."""
    n_samples = protocol_parts(protocol)[0]
    return None if n_samples == "all" else int(n_samples)


class Plan:
    """Everything the workflow decides from a validated config (plan.config.validated) before any
    job: constructing it runs the checks that need no file system (names.py: names, methods);
    checks.run_all runs the rest."""

    def __init__(self, config: dict, results: str = "results"):
        self.config, self.results = config, results
        self.models = {name: dict(m) for name, m in config["models"].items()}
        for name, model in self.models.items():  # rule convert_model writes a converted model's source
            if "convert_from" in model:
                model["source"] = f"{results}/models/converted/{name}"
        self.seeds = config["seeds"]
        self.n_adapt = config["adaptation"]["n_samples"]
        self.sampling = config["adaptation"]["sampling"]
        self.experiments = {name: e for name, e in config["experiments"].items() if e["enabled"]}
        main_models = [name for name, m in self.models.items() if m.get("main_grid", True)]
        # the main grid first: checks name its keys `adaptation.*`, the experiments' `experiments.<name>.*`
        self.blocks = [("", {"models": main_models, "methods": config["methods"], "datasets": config["datasets"]})]
        self.blocks += [(f"experiments.{name}", e) for name, e in self.experiments.items()]
        check_names(config, self.models)
        self.datasets = sorted({d for _, b in self.blocks for d in b.get("datasets", []) + _cross_datasets(b)})
        self.task = {d: task_for(d).family for d in self.datasets}
        # The config section of a dataset's evaluation options: its task family's, or `evaluation.math`
        # for the math task (ECHO), which votes like MCQ but is scored by sampled pass@k
        self.section = {d: "math" if REGISTRY[d].task == "math" else self.task[d] for d in self.datasets}
        self.adapting = sorted({m for _, b in self.blocks for m in b["methods"] if m != "zero-shot"})
        # every method resolved now so a wrong hyper-parameter stops the run before any job
        self.method_specs = resolved_methods(config, self.adapting)
        self.per_sample = [m for m in self.adapting if is_per_sample(m)]
        self.grpo_methods = [m for m in self.adapting if not is_per_sample(m)]
        # each rerun protocol's config (plan/protocols.py variant) and resolved methods
        self.configs = {name: config if name == config["protocol"] else variant(config, name)
                        for name in sorted({p for _, b in self.blocks for p in self.reruns(b)})}
        self.specs_by_protocol = {name: self.method_specs if name == config["protocol"]
                                  else resolved_methods(c, self.adapting) for name, c in self.configs.items()}
        self.runs = self._run_grid()
        self.run_models = sorted({r.model for r in self.runs})  # what the pre-flight checks and fetch downloads

    # --- the grid ---------------------------------------------------------------------------

    def fits(self, method: str, dataset: str) -> bool:
        """A method's answers fit the dataset's task (MCQ rewards vote on letters, VR-TTRL on boxes); zero-shot
        adapts on none (its task is None)."""
        return method_task(method) == self.task[dataset]

    def reruns(self, block: dict) -> list[str]:
        """The rerun protocols of a block: its `protocols`, else the config's `protocol`."""
        return block.get("protocols", [self.config["protocol"]])

    def protocol(self, block: dict, rerun: str) -> str:
        return protocol_name(block.get("n_samples", self.n_adapt), block.get("sampling", self.sampling), rerun)

    def zero_shot_protocol(self, protocol: str) -> str:
        """A zero-shot row depends on the adaptation set only through the excluded adaptation samples:
        without exclusion every adaptation set shares the main grid's zero-shot evaluation (one per rerun
        protocol: the template, parser and budget differ)."""
        if self.config["evaluation"]["exclude_adaptation_samples"]:
            return protocol
        return self.protocol({}, rerun_protocol(protocol))

    def _run_grid(self) -> list[Run]:
        runs = set()
        for _, block in self.blocks:
            pairs = [(d, d) for d in block.get("datasets", [])] + [tuple(p) for p in block.get("cross", [])]
            for proto in (self.protocol(block, rerun) for rerun in self.reruns(block)):
                for model in block.get("models", list(self.models)):
                    for seed in block.get("seeds", self.seeds):
                        for train, target in pairs:
                            if "zero-shot" in block["methods"]:
                                runs.add(Run(model, "zero-shot", "none", target, self.zero_shot_protocol(proto), seed))
                            runs.update(Run(model, m, train, target, proto, seed)
                                        for m in block["methods"] if self.fits(m, train))
        return sorted(runs)

    def adaptations(self) -> list[tuple[str, str, str, str, int]]:
        """One adaptation per (model, method, train dataset, protocol, seed), whatever it is evaluated on."""
        return sorted({(r.model, r.method, r.train, r.protocol, r.seed) for r in self.runs if r.method != "zero-shot"})

    def jobs(self) -> list[Job]:
        """Every GPU job: adaptations (per-sample ones also predict) and evaluations."""
        jobs = [Job("adapt_per_sample" if m in self.per_sample else "adapt", model, m, d, None, p, s)
                for model, m, d, p, s in self.adaptations()]
        jobs += [Job("evaluate", r.model, r.method, r.train, r.target, r.protocol, r.seed)
                 for r in self.runs if r.method not in self.per_sample]
        return jobs

    def eval_dirs(self) -> list[str]:
        return [f"{self.results}/eval/{r.model}/{r.method}/{r.train}/{r.target}/{r.protocol}/seed{r.seed}" for r in self.runs]

    def adapt_dirs(self) -> list[str]:
        return [f"{self.results}/adapt/{m}/{method}/{d}/{p}/seed{s}" for m, method, d, p, s in self.adaptations()]

    def data_dirs(self) -> list[str]:
        return [f"{self.results}/data/{d}" for d in self.datasets]

    # --- each job's settings ----------------------------------------------------------------

    def method_spec(self, method: str, protocol: str) -> dict:
        """A method's resolved preset under the rerun protocol of a path level (e.g. n20_random_authors)."""
        return self.specs_by_protocol[rerun_protocol(protocol)][method]

    def method_settings(self, method: str, protocol: str) -> dict:
        """The resolved preset plus the colocated vLLM engine's settings (config `adaptation.vllm`) and the rerun
        protocol, whose image bound the job applies (models/families.py image_size_bound)."""
        return {**self.method_spec(method, protocol), "vllm": self.config["adaptation"]["vllm"],
                "protocol": rerun_protocol(protocol)}

    def base_model_input(self, model: str) -> str | list:
        """A model built or converted by this workflow is an input file (its source); a Hub id is not."""
        entry = self.models[model]
        return entry["source"] if "build" in entry or "convert_from" in entry else []

    def eval_model(self, job: Job) -> tuple[str, dict]:
        """An evaluation's model source and input files: the base model for zero-shot, else the adapted
        weights and the adaptation's run.json."""
        if job.method == "zero-shot":
            return self.models[job.model]["source"], {"model": self.base_model_input(job.model)}
        adapted = f"{self.results}/adapt/{job.model}/{job.method}/{job.dataset}/{job.protocol}/seed{job.seed}"
        return f"{adapted}/model", {"model": f"{adapted}/model", "run": f"{adapted}/run.json"}

    def paper_model_names(self) -> dict[str, str]:
        """Our model names -> the papers' (`models.<name>.paper_name`)."""
        return {name: m.get("paper_name", name) for name, m in self.models.items()}

    def eval_flags(self, dataset: str, protocol: str) -> str:
        """`ttrl-bench evaluate` / `adapt-per-sample` options of the dataset's task (config `evaluation.<task>`)
        under the rerun protocol of a path level."""
        section, rerun = self.section[dataset], rerun_protocol(protocol)
        per_task = self.configs[rerun]["evaluation"][section]
        flags = [f"--max-new-tokens {per_task['max_new_tokens']}", f"--eval-samples {per_task['samples']}"]
        if self.config["evaluation"]["exclude_adaptation_samples"]:
            flags.append("--exclude-adaptation-samples")
        for key in ("sam2", "empty_mask_iou", "choice_parser", "chat_template", "input_size", "query_form", "sam2_multimask",
                    "prompt", "grader", "top_k", "min_image_side"):
            if per_task.get(key):
                flags.append(f"--{key.replace('_', '-')} {per_task[key]}")
        flags.append(f"--protocol {rerun}")
        if section == "math":  # ECHO: pass@k of sampled completions at the validation temperature
            flags.append(f"--temperature {per_task['temperature']} --top-p {per_task['top_p']} "
                         f"--n-samples {per_task['n_samples']} --pass-k {','.join(map(str, per_task['pass_k']))}")
        return " ".join(flags)

    def final_outputs(self) -> list[str]:
        """What `snakemake` builds by default: the store, the tables, the figures, the reward audit."""
        tables = [f"{self.results}/tables/{name}.md" for name in ("ttrv_table1_layout", "fidelity")]
        figures = [f"{self.results}/figures/{name}.png"
                   for name in ("accuracy", "training_curves", "cross_dataset", "step_costs")]
        return [f"{self.results}/benchmark.duckdb", *tables, *figures, f"{self.results}/audit/reward_audit.png"]

    def job_counts(self) -> dict[str, int]:
        """Jobs per rule, as Snakemake's dry run counts them on a fresh results tree."""
        counts = {"prepare_data": len(self.datasets)}
        models = {r.model for r in self.runs}
        built = [m for m in models if "build" in self.models[m]]
        if built:
            counts["prepare_data"] = len(set(self.datasets) | set(DEMO_DATASETS))
            counts["build_demo_model"] = len(built)
        converted = [m for m in models if "convert_from" in self.models[m]]
        if converted:
            counts["convert_model"] = len(converted)
        for job in self.jobs():
            counts[job.rule] = counts.get(job.rule, 0) + 1
        return {**counts, "ingest_results": 1, "render_tables": 1, "plot_figures": 1, "audit_rewards": 1, "all": 1}


def _cross_datasets(block: dict) -> list[str]:
    return [d for pair in block.get("cross", []) for d in pair]


__all__ = ["BUILD_FAMILY", "DEMO_DATASETS", "METHOD_NAMES", "Job", "Plan", "Run", "adaptation_samples", "protocol_name",
           "protocol_parts", "rerun_protocol"]
