rule adapt:
    input:
        model=get_base_model_input,
        data="results/data/{dataset}/manifest.parquet",
    output:
        model=adapted_weights("results/adapt/{model}/{method}/{dataset}/{protocol}/seed{seed}/model"),
        train_log="results/adapt/{model}/{method}/{dataset}/{protocol}/seed{seed}/train_log.parquet",
        run="results/adapt/{model}/{method}/{dataset}/{protocol}/seed{seed}/run.json",
    params:
        launch=get_launcher("adapt"),
        source=get_model_source,
        method=get_method_json("adapt"),
        protocol=get_protocol_flags,
    log:
        "logs/adapt/{model}/{method}/{dataset}/{protocol}/seed{seed}.log",
    benchmark:
        "results/benchmarks/adapt/{model}/{method}/{dataset}/{protocol}/seed{seed}.tsv"
    wildcard_constraints:
        method=one_of(PLAN.grpo_methods) or "(?!)",
    # the longest jobs first, the evaluations (shorter) after: on a few cores the run then ends with short jobs
    # side by side, not one long job alone (issue 57: the demo's 2 cores)
    priority: 1
    threads: get_resource("adapt", "threads")
    resources:
        gpu=get_resource("adapt", "gpu"),
        mem_mb=get_resource("adapt", "mem_mb"),
        runtime=get_resource("adapt", "runtime"),
        gpu_model=GPU_MODEL,
    conda:
        "../envs/gpu.yaml"
    shell:
        "OMP_NUM_THREADS={threads} {params.launch} adapt --model-source {params.source:q}"
        " --model-name {wildcards.model} --method {wildcards.method} --dataset {wildcards.dataset}"
        " --data results/data/{wildcards.dataset} {params.protocol}"
        " --seed {wildcards.seed} --method-json {params.method:q}"
        " --out results/adapt/{wildcards.model}/{wildcards.method}/{wildcards.dataset}/{wildcards.protocol}/seed{wildcards.seed}"
        " > {log} 2>&1"


rule adapt_per_sample:
    input:
        model=get_base_model_input,
        data="results/data/{dataset}/manifest.parquet",
    output:
        predictions="results/eval/{model}/{method}/{dataset}/{dataset}/{protocol}/seed{seed}/predictions.parquet",
        metrics="results/eval/{model}/{method}/{dataset}/{dataset}/{protocol}/seed{seed}/metrics.json",
        train_log="results/adapt/{model}/{method}/{dataset}/{protocol}/seed{seed}/train_log.parquet",
        run="results/adapt/{model}/{method}/{dataset}/{protocol}/seed{seed}/run.json",
    params:
        launch=get_launcher("adapt_per_sample"),
        source=get_model_source,
        method=get_method_json("adapt_per_sample"),
        protocol=get_protocol_flags,
        eval_flags=get_eval_flags,
    log:
        "logs/adapt_per_sample/{model}/{method}/{dataset}/{protocol}/seed{seed}.log",
    benchmark:
        "results/benchmarks/adapt_per_sample/{model}/{method}/{dataset}/{protocol}/seed{seed}.tsv"
    wildcard_constraints:
        method=one_of(PLAN.per_sample) or "(?!)",
    priority: 1  # as adapt's
    threads: get_resource("adapt_per_sample", "threads")
    resources:
        gpu=get_resource("adapt_per_sample", "gpu"),
        mem_mb=get_resource("adapt_per_sample", "mem_mb"),
        runtime=get_resource("adapt_per_sample", "runtime"),
        gpu_model=GPU_MODEL,
    conda:
        "../envs/gpu.yaml"
    shell:
        "OMP_NUM_THREADS={threads} {params.launch} adapt-per-sample --model-source {params.source:q}"
        " --model-name {wildcards.model} --method {wildcards.method} --dataset {wildcards.dataset}"
        " --data results/data/{wildcards.dataset} {params.protocol} --seed {wildcards.seed} {params.eval_flags}"
        " --method-json {params.method:q}"
        " --adapt-out results/adapt/{wildcards.model}/{wildcards.method}/{wildcards.dataset}/{wildcards.protocol}/seed{wildcards.seed}"
        " --out results/eval/{wildcards.model}/{wildcards.method}/{wildcards.dataset}/{wildcards.dataset}/{wildcards.protocol}/seed{wildcards.seed}"
        " > {log} 2>&1"
