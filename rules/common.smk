import json
import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.utils import min_version

# The package of this checkout, in this process as in every job (below: TTRL_BENCH)
SRC = str(Path(workflow.basedir) / "src")
sys.path.insert(0, SRC)

from ttrl_bench.datasets.registry import REGISTRY
from ttrl_bench.plan import Job, Plan, checks, job_request, validated
from ttrl_bench.plan.cards import slurm_gpu_model
from ttrl_bench.plan.grid import BUILD_FAMILY, DEMO_DATASETS, protocol_parts
from ttrl_bench.plan.resources import job_method_settings, largest_gpu_request, launch_command
from ttrl_bench.plan.results_tree import check_results_tree, claim_results_tree, config_files
from ttrl_bench.results.table_specs import PAPER_TABLES  # for rules/aggregate.smk (not via paper_tables: scipy)
from ttrl_bench.runs.launch import machine_has_gpu

min_version("9.0")


# beside this workflow, not in the working directory: `snakemake --directory runs/<name>` reads it too
configfile: os.path.join(workflow.basedir, "config", "config.yaml")


# The planning is the library's (src/ttrl_bench/plan): the job grid, each job's settings and
# request, and every dry-run check, which stops the run before any job naming the config key.
def checked(step, *args):
    """A planning step; a config mistake (ValueError) ends the run with its message alone, without Snakemake's
    traceback of this file."""
    try:
        return step(*args)
    except ValueError as err:
        print(f"config error: {err}", file=sys.stderr)
        sys.exit(1)


PLAN = checked(lambda: Plan(validated(config)))  # validated: also fills in the schema's defaults
GPU_MODEL = slurm_gpu_model(PLAN.config)  # resources.gpu_model: the card SLURM is asked for ("": any)


def slurm_profile():
    """A SLURM run: profiles/slurm names every job's partition (snakemake-executor-plugin-slurm's
    `slurm_partition`). Known when this file is parsed, unlike the executor (a dry run's is local)."""
    defaults = workflow.resource_settings.default_resources
    return defaults is not None and "slurm_partition" in defaults


if workflow.is_main_process and slurm_profile():
    checked(checks.check_slurm, os.environ, workflow.global_resources.get("gpu").value, largest_gpu_request(PLAN))
checked(checks.run_all, PLAN, workflow.overwrite_configfiles,  # after the profile check: a wrong flag first
        workflow.config_settings.replace_workflow_config)

# One results tree per config (plan/results_tree.py): another config's run here stops before any job.
CONFIG_FILES = config_files(workflow.overwrite_configfiles, workflow.config_settings.replace_workflow_config)
if workflow.is_main_process:
    checked(check_results_tree, PLAN.results, CONFIG_FILES)


onstart:
    claim_results_tree(PLAN.results, CONFIG_FILES)


def one_of(names):
    """A wildcard regex matching exactly these names ("refcoco+-testA" holds a regex character)."""
    return "|".join(re.escape(n) for n in names)


wildcard_constraints:
    model=one_of(PLAN.models),
    dataset=one_of(REGISTRY),
    target=one_of(PLAN.datasets),
    train=one_of(PLAN.datasets + ["none"]),
    protocol=r"n(\d+|all)_(random|biased-\d+)(_authors)?",  # plan.grid.protocol_name
    seed=r"\d+",


def get_final_output():
    return PLAN.final_outputs()


def get_model_source(wildcards):
    return PLAN.models[wildcards.model]["source"]


def get_base_model_input(wildcards):
    return PLAN.base_model_input(wildcards.model)


def get_eval_model_input(wildcards):
    """The model an evaluation loads. Adapted weights are ancient(): their run.json, written after them, tells
    Snakemake when they are new, while a directory half-deleted by a killed run (temp(), removed file by file,
    its mtime now newer) must not rerun an evaluation that finished: the rerun would load it."""
    inputs = PLAN.eval_model(Job.of("evaluate", wildcards))[1]
    return {**inputs, "model": ancient(inputs["model"])} if "run" in inputs else inputs


def get_eval_model_source(wildcards):
    return PLAN.eval_model(Job.of("evaluate", wildcards))[0]


def get_adapt_run_flag(wildcards, input):
    return f"--adapt-run {input.run}" if wildcards.method != "zero-shot" else ""


def get_method_json(rule):
    """An adaptation job's resolved method settings, its decided micro-batch in (plan.resources)."""
    return lambda wildcards: json.dumps(job_method_settings(PLAN, Job.of(rule, wildcards)))


def get_protocol_flags(wildcards):
    n_samples, sampling = protocol_parts(wildcards.protocol)
    return f"--n-adapt {n_samples} --sampling {sampling}"


def get_eval_flags(wildcards):
    return PLAN.eval_flags(wildcards.target if hasattr(wildcards, "target") else wildcards.dataset, wildcards.protocol)


def gpu_jobs_on_cpu():
    """Without a GPU, a local run's GPU jobs ask for none (profiles/default's gpu=1 would hold them to
    one at a time) and share the cores, each pinning its threads (cli.pin_numerics). Cluster jobs, and
    a SLURM dry run, ask. Asked per job: Snakemake knows its executor only once it runs the workflow."""
    return workflow.local_exec and not machine_has_gpu() and not slurm_profile()


def get_resource(rule, name):
    """One resource of a rule's jobs, as a function of a job's wildcards (plan.resources.job_request);
    `gpu` is 0 where GPU jobs run on the CPU."""
    def resource(wildcards):
        request = job_request(PLAN, Job.of(rule, wildcards))
        if name == "gpu":
            return 0 if gpu_jobs_on_cpu() else request.gpus
        return getattr(request, name)
    return resource


def get_launcher(rule):
    """`ttrl-bench` as one process, or under `accelerate launch` with FSDP2 over the job's decided
    GPUs, offloaded or not (plan.resources.launch_command)."""
    return lambda wildcards: launch_command(PLAN, Job.of(rule, wildcards))


def get_build_family(wildcards):
    return BUILD_FAMILY[PLAN.models[wildcards.model]["build"]]


def get_convert_from(wildcards):
    return PLAN.models[wildcards.model]["convert_from"]


# Every rule runs the package from this checkout, so the same command works in the venv of the
# README and in `--sdm conda` environments (envs/*.yaml), which install the dependencies only.
# The checkout reaches the jobs through a shell prefix (cluster jobs parse this file again), never
# through a rule's command or params: a workdir that is moved, copied or has a space in its path
# plans the same jobs.
# (braces doubled: Snakemake formats the prefix like a rule's command)
QUOTED_SRC = shlex.quote(SRC).replace("{", "{{").replace("}", "}}")
shell.prefix(f"export PYTHONPATH={QUOTED_SRC}${{{{PYTHONPATH:+:$PYTHONPATH}}}}; ")
TTRL_BENCH = "python -m ttrl_bench.cli"


def adapted_weights(path):
    """An adaptation's weights: deleted once evaluated (temp()) unless config
    `adaptation.keep_adapted_weights` keeps them for reruns by hand."""
    return directory(path) if config["adaptation"]["keep_adapted_weights"] else temp(directory(path))
