rule prepare_data:
    output:
        manifest="results/data/{dataset}/manifest.parquet",
        stats="results/data/{dataset}/prep_stats.json",
    params:
        cli=TTRL_BENCH,
        seed=config["seeds"][0],
        rule=config["data"]["resolution_rule"],
        item_source=config["data"]["items"],
        source=lambda wildcards: json.dumps(config["data"]["sources"].get(wildcards.dataset)),
    log:
        "logs/prepare_data/{dataset}.log",
    benchmark:
        "results/benchmarks/prepare_data/{dataset}.tsv"
    conda:
        "../envs/cpu.yaml"
    shell:
        "{params.cli} prepare-data --dataset {wildcards.dataset} --out results/data/{wildcards.dataset}"
        " --seed {params.seed} --resolution-rule {params.rule} --items {params.item_source} --source-json {params.source:q} > {log} 2>&1"
