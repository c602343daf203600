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
        seed=config["seeds"][0],
    log:
        "logs/build_demo_model/{model}.log",
    benchmark:
        "results/benchmarks/build_demo_model/{model}.tsv"
    # torch runs on one thread whatever this says (cli.pin_numerics): a second one reserved here kept the
    # reward audit, which needs no model, from running beside the build (issue 57's profile)
    threads: 1
    conda:
        "../envs/cpu.yaml"
    shell:
        "OMP_NUM_THREADS={threads} {params.cli} build-demo-model --data {params.data}"
        " --out {output} --steps {params.steps} --seed {params.seed} --family {params.family} > {log} 2>&1"


rule convert_model:
    """A model of config `models.<name>.convert_from` (an original-format InternVL checkpoint, e.g.
    InternVL2.5-4B of TTRV Tables 3, 5, 6, 11, 12) as a transformers-native directory, its source."""
    output:
        directory("results/models/converted/{model}"),
    params:
        cli=TTRL_BENCH,
        convert_from=get_convert_from,
    log:
        "logs/convert_model/{model}.log",
    benchmark:
        "results/benchmarks/convert_model/{model}.tsv"
    threads: 1
    resources:
        mem_mb=get_resource("convert_model", "mem_mb"),  # the bf16 weights are held on the host
        runtime=get_resource("convert_model", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "OMP_NUM_THREADS={threads} {params.cli} convert-model --source {params.convert_from:q}"
        " --out {output} > {log} 2>&1"
