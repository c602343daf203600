rule build_demo_model:
    input:
        expand("results/data/{dataset}/manifest.parquet", dataset=DEMO_DATASETS),
    output:
        directory("results/models/{model}"),
    params:
        cli=TTRL_BENCH,
        data=expand("results/data/{dataset}", dataset=DEMO_DATASETS),
        steps=config["demo_model"]["warm_start_steps"],
        family=get_build_family,
        seed=SEEDS[0],
    log:
        "logs/build_demo_model/{model}.log",
    benchmark:
        "results/benchmarks/build_demo_model/{model}.tsv"
    threads: 2
    conda:
        "../envs/cpu.yaml"
    shell:
        "OMP_NUM_THREADS={threads} {params.cli} build-demo-model --data {params.data}"
        " --out {output} --steps {params.steps} --seed {params.seed} --family {params.family} > {log} 2>&1"
