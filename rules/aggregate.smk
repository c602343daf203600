localrules:
    ingest_results,
    render_tables,
    plot_figures,
    audit_rewards,


rule ingest_results:
    input:
        metrics=[f"{d}/metrics.json" for d in PLAN.eval_dirs()],
        train_logs=[f"{d}/train_log.parquet" for d in PLAN.adapt_dirs()],
        prep=[f"{d}/prep_stats.json" for d in PLAN.data_dirs()],
    output:
        "results/benchmark.duckdb",
    params:
        cli=TTRL_BENCH,
        eval_dirs=PLAN.eval_dirs(),
        adapt_dirs=PLAN.adapt_dirs(),
        data_dirs=PLAN.data_dirs(),
        # read as they are: every job that writes one is upstream of the metrics above
        benchmarks="results/benchmarks",
        # the papers' names of ours: the claims' published differences (ttrl_bench.results.claims)
        models=json.dumps(PLAN.paper_model_names()),
        datasets=json.dumps(config["tables"]["dataset_names"]),
    log:
        "logs/ingest_results.log",
    conda:
        "../envs/cpu.yaml"
    shell:
        "{params.cli} ingest --db {output} --eval-dirs {params.eval_dirs} --adapt-dirs {params.adapt_dirs}"
        " --data-dirs {params.data_dirs} --benchmark-dir {params.benchmarks}"
        " --model-names {params.models:q} --dataset-names {params.datasets:q} > {log} 2>&1"


rule render_tables:
    input:
        db="results/benchmark.duckdb",
        # after them: results/README.md embeds every figure (results/front_page.py)
        figures=expand("results/figures/{name}.png", name=["accuracy", "training_curves", "cross_dataset", "step_costs", "claims"]),
        audit="results/audit/reward_audit.png",
    output:
        md=report(
            "results/tables/ttrv_table1_layout.md",
            caption="../workflow/report/table1.rst",
            category="Tables",
        ),
        csv="results/tables/ttrv_table1_layout.csv",
        published=report(
            "results/tables/ttrv_table1_vs_published.csv",
            caption="../workflow/report/table1_published.rst",
            category="Tables",
        ),
        # every published table as .md / .tex / .csv (ttrl_bench.results.paper_tables)
        paper_tables=[f"results/tables/{paper}_table{n}.{ext}" for paper, n in PAPER_TABLES for ext in ("md", "tex", "csv")],
        fidelity=report(
            "results/tables/fidelity.md",
            caption="../workflow/report/fidelity.rst",
            category="Tables",
        ),
        fidelity_csv="results/tables/fidelity.csv",
        # each TTRV cell's authors' log and provenance flags (ttrl_bench.results.provenance)
        provenance="results/tables/ttrv_provenance.csv",
        preparation=report(
            "results/tables/data_preparation.md",
            caption="../workflow/report/data_preparation.rst",
            category="Tables",
        ),
        preparation_csv="results/tables/data_preparation.csv",
        # the papers' claims, each a paired test of two arms (ttrl_bench.results.claims)
        claims=report(
            "results/tables/claims.md",
            caption="../workflow/report/claims.rst",
            category="Tables",
        ),
        claims_csv="results/tables/claims.csv",
        front_page="results/README.md",
    params:
        cli=TTRL_BENCH,
        models=json.dumps(PLAN.paper_model_names()),
        datasets=json.dumps(config["tables"]["dataset_names"]),
        n_adapt=config["adaptation"]["n_samples"],
        sampling=config["adaptation"]["sampling"],
        protocol=config["protocol"],
        definitions=config["tables"]["metric_definitions"],
    log:
        "logs/render_tables.log",
    conda:
        "../envs/cpu.yaml"
    shell:
        "{params.cli} render-tables --db {input.db} --out-dir results/tables --front-page {output.front_page}"
        " --model-names {params.models:q} --dataset-names {params.datasets:q}"
        " --n-adapt {params.n_adapt} --sampling {params.sampling} --protocol {params.protocol}"
        " --metric-definitions {params.definitions} > {log} 2>&1"


rule plot_figures:
    input:
        "results/benchmark.duckdb",
    output:
        accuracy=report(
            "results/figures/accuracy.png",
            caption="../workflow/report/accuracy.rst",
            category="Figures",
        ),
        curves=report(
            "results/figures/training_curves.png",
            caption="../workflow/report/training_curves.rst",
            category="Figures",
        ),
        cross=report(
            "results/figures/cross_dataset.png",
            caption="../workflow/report/cross_dataset.rst",
            category="Figures",
        ),
        step_costs=report(
            "results/figures/step_costs.png",
            caption="../workflow/report/step_costs.rst",
            category="Figures",
        ),
        claims=report(
            "results/figures/claims.png",
            caption="../workflow/report/claims_figure.rst",
            category="Figures",
        ),
    params:
        cli=TTRL_BENCH,
        models=json.dumps(PLAN.paper_model_names()),
        datasets=json.dumps(config["tables"]["dataset_names"]),
        n_adapt=config["adaptation"]["n_samples"],
        sampling=config["adaptation"]["sampling"],
        protocol=config["protocol"],
    log:
        "logs/plot_figures.log",
    conda:
        "../envs/cpu.yaml"
    shell:
        "{params.cli} plot-figures --db {input} --out-dir results/figures"
        " --model-names {params.models:q} --dataset-names {params.datasets:q}"
        " --n-adapt {params.n_adapt} --sampling {params.sampling} --protocol {params.protocol} > {log} 2>&1"


rule audit_rewards:
    output:
        csv="results/audit/reward_audit.csv",
        figure=report(
            "results/audit/reward_audit.png",
            caption="../workflow/report/reward_audit.rst",
            category="Reward audit",
        ),
    params:
        cli=TTRL_BENCH,
    log:
        "logs/audit_rewards.log",
    conda:
        "../envs/cpu.yaml"
    shell:
        "{params.cli} audit-reward --out-dir results/audit > {log} 2>&1"
