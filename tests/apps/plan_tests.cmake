# `weft plan`, `weft train --layout auto` and the memory keys of `weft bench
# step --json` (included from CMakeLists.txt). The CPU probes are cached in
# the test's own folder, not the user's ~/.cache.
set(PLAN_ENV "WEFT_CACHE_DIR=${DIR}/plan-cache")
set(PLAN "${WEFT_BIN}|plan|--preset|llama-tiny|--world|4|--seq|128|--global-batch|16")
weft_cli_test(help_plan "${WEFT_BIN}|plan|--help"
              EXPECT "usage: weft plan.*--world N.*--memory-limit SIZE.*--device cpu.cuda.*--cluster FILE.*--evaluate OPTIONS.*--json")
weft_cli_test(plan_table "${PLAN}|--top|3" ENV ${PLAN_ENV}
              EXPECT "layouts considered.*\n *# +peak/rank +tokens/s +step ms +weft train options\n +1 .* --tp [0-9]+ .*--micro-batch [0-9]+")
weft_cli_test(plan_json_keys "${PLAN}|--top|2|--json" ENV ${PLAN_ENV}
              EXPECT "^{\"args\":\\[\"--tp\",\"[0-9]+\",.*\"--micro-batch\",\"[0-9]+\".*\\],\"predicted_peak_bytes\":[0-9]+,\"predicted_tokens_per_s\":[0-9.e+]+,.*\n{\"args\":")
weft_cli_test(plan_nothing_fits "${PLAN}|--memory-limit|1KiB" ENV ${PLAN_ENV} RC 2
              EXPECT "^weft: error: no layout of 4 ranks fits --memory-limit 1KiB: the smallest needs [0-9.]+ [KMG]iB per rank \\(weft train --tp [0-9]+ .*\\)")
weft_cli_test(plan_bad_limit "${PLAN}|--memory-limit|lots" RC 2
              EXPECT "^weft: error: --memory-limit lots: give a size such as 40GiB")
weft_cli_test(plan_bad_world "${WEFT_BIN}|plan|--world|0" RC 2
              EXPECT "^weft: error: --world must lie in \\[1, 16777216\\], got 0")
weft_cli_test(plan_batch_does_not_split "${PLAN}|--global-batch|3|--world|8|--preset|tiny" RC 2
              EXPECT "^weft: error: no layout of 8 ranks trains this model at --global-batch 3")
weft_cli_test(plan_cluster_needs_cuda "${PLAN}|--cluster|x.json" RC 2
              EXPECT "^weft: error: --cluster describes GPUs: pass it with --device cuda")
weft_cli_test(plan_cluster_bad_key
              "${PLAN}|--device|cuda|--cluster|${CMAKE_CURRENT_SOURCE_DIR}/cluster_bad.json" RC 2
              EXPECT "^weft: error: .*cluster_bad.json: unknown key \"nvlink_gbps\". a cluster description takes")
weft_cli_test(plan_evaluate_heads "${WEFT_BIN}|plan|--preset|llama-tiny|--evaluate|--tp 3" RC 2
              EXPECT "^weft: error: --evaluate '--tp 3': --tp 3: heads 8 is not divisible by tp 3")
weft_cli_test(plan_evaluate_unknown "${WEFT_BIN}|plan|--evaluate|--tp 2 --zz 4" RC 2
              EXPECT "^weft: error: --zz is not a layout option")
weft_cli_test(plan_evaluate_recompute "${WEFT_BIN}|plan|--evaluate|--tp 2 --recompute most" RC 2
              EXPECT "^weft: error: unknown recompute mode 'most': use none, selective or full")
# Llama 3 405B on paper, the first layout of the Llama 3 paper's Table 4.
weft_cli_test(plan_llama3_405b
              "${WEFT_BIN}|plan|--preset|llama3-405b|--device|cuda|--evaluate|--tp 8 --pp 16 --vpp 2 --dp 64 --micro-batch 1 --grad-accum 32"
              EXPECT "layout: --tp 8 --pp 16 --pp-schedule interleaved --vpp 2 --dp 64 --micro-batch 1 --grad-accum 32 \\(8192 ranks, 2048 sequences per step\\).*MFU [0-9.]+%")
weft_cli_test(train_layout_auto
              "${WEFT_BIN}|train|--layout|auto|--memory-limit|1GiB|--tp|2|--micro-batch|4|--steps|1|--sample-tokens|0|--eval-batches|1"
              ENV ${PLAN_ENV} EXPECT "layout auto: --tp [12] .*per rank.*\n.*step 1/1  loss")
weft_cli_test(train_layout_auto_nothing_fits
              "${WEFT_BIN}|train|--layout|auto|--memory-limit|1KiB|--tp|2|--steps|1" ENV ${PLAN_ENV}
              RC 2 EXPECT "^weft: error: no layout of 2 ranks fits --memory-limit 1KiB")
weft_cli_test(train_memory_limit_needs_auto "${WEFT_BIN}|train|--memory-limit|1GiB|--steps|1" RC 2
              EXPECT "^weft: error: --memory-limit bounds the layouts --layout auto chooses from")
set(STEP_JSON "${WEFT_BIN}|bench|step|--preset|tiny|--tp|2|--micro-batch|2|--seq|32|--steps|1|--warmup|0|--no-baseline|--json")
weft_cli_test(bench_step_memory_keys "${STEP_JSON}"
              EXPECT "\"peak_memory_bytes_per_rank\":\\[[0-9]+,[0-9]+\\],\"predicted_peak_bytes\":[0-9]+,\"optimizer_state_bytes\":[0-9]+")
weft_cli_test(bench_step_global_batch "${STEP_JSON}|--global-batch|8|--grad-accum|2"
              EXPECT "\"tokens_per_s\"")
