# shellcheck shell=bash
# Per-board defaults of the assistant (documented in jetson/README.md, "Per-board defaults"; a test
# checks the two agree). budget: KV-cache budget in tokens; fps: frames sampled per second of video.
# Sizes: weights (bf16) + bounded KV cache + activations must fit in the unified memory left after
# the OS (see the README for the arithmetic).

# board_defaults BOARD -> "model budget fps dtype"
board_defaults() {
  case $1 in
    agx-orin-64) echo "Qwen/Qwen2-VL-7B-Instruct 4096 2 bfloat16" ;;
    agx-orin-32) echo "Qwen/Qwen2-VL-2B-Instruct 4096 2 bfloat16" ;;
    orin-nx-16) echo "Qwen/Qwen2-VL-2B-Instruct 2048 1 bfloat16" ;;
    orin-nx-8) echo "HuggingFaceTB/SmolVLM2-500M-Video-Instruct 1024 1 bfloat16" ;;
    orin-nano-8) echo "HuggingFaceTB/SmolVLM2-500M-Video-Instruct 1024 1 bfloat16" ;;
    orin-nano-4) echo "HuggingFaceTB/SmolVLM2-500M-Video-Instruct 512 0.5 bfloat16" ;;
    *) return 1 ;;
  esac
}

known_boards() { echo "agx-orin-64 agx-orin-32 orin-nx-16 orin-nx-8 orin-nano-8 orin-nano-4"; }
