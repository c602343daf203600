rule evaluate:
    input:
        unpack(get_eval_model_input),
        data="results/data/{target}/manifest.parquet",
    output:
        predictions="results/eval/{model}/{method}/{train}/{target}/{protocol}/seed{seed}/predictions.parquet",
        metrics="results/eval/{model}/{method}/{train}/{target}/{protocol}/seed{seed}/metrics.json",
    params:
        cli=TTRL_BENCH,
        source=get_eval_model_source,
        adapt_run=get_adapt_run_flag,
        protocol=get_protocol_flags,
        eval_flags=get_eval_flags,
        batch_size=config["evaluation"]["batch_size"],
        backend=config["evaluation"]["backend"],
        vllm_settings=json.dumps(config["evaluation"]["vllm"]),  # one JSON argument
    log:
        "logs/evaluate/{model}/{method}/{train}/{target}/{protocol}/seed{seed}.log",
    benchmark:
        "results/benchmarks/evaluate/{model}/{method}/{train}/{target}/{protocol}/seed{seed}.tsv"
    wildcard_constraints:
        method=one_of(["zero-shot"] + PLAN.grpo_methods),
    threads: get_resource("evaluate", "threads")
    resources:
        gpu=get_resource("evaluate", "gpu"),
        mem_mb=get_resource("evaluate", "mem_mb"),
        runtime=get_resource("evaluate", "runtime"),
        gpu_model=GPU_MODEL,
    conda:
        "../envs/gpu.yaml"
    shell:
        "OMP_NUM_THREADS={threads} {params.cli} evaluate --model-source {params.source:q}"
        " --model-name {wildcards.model} --method {wildcards.method} --train-dataset {wildcards.train}"
        " --dataset {wildcards.target} --data results/data/{wildcards.target} {params.adapt_run}"
        " {params.protocol} --seed {wildcards.seed} {params.eval_flags}"
        " --batch-size {params.batch_size} --backend {params.backend} --vllm-settings {params.vllm_settings:q}"
        " --out results/eval/{wildcards.model}/{wildcards.method}/{wildcards.train}/{wildcards.target}/{wildcards.protocol}/seed{wildcards.seed}"
        " > {log} 2>&1"
