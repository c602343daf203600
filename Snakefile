# ttrl-bench: test-time RL for vision-language models, from data to the papers' tables.
#   prepare_data -> build_demo_model (demo only) -> adapt -> evaluate -> ingest_results
#   -> render_tables, plot_figures
# Each rule calls one `ttrl-bench` subcommand (src/ttrl_bench/cli/, one module per group of commands).

include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/models.smk"
include: "rules/adapt.smk"
include: "rules/evaluate.smk"
include: "rules/aggregate.smk"


rule all:
    input:
        get_final_output(),
    default_target: True
