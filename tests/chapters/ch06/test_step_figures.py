"""Chapter 6's printed verdict of the goal and the closing plot's sentence read the stored run as the prose
says, and a changed rerun makes them raise (chapters/ch06/step_figures.py, figures/peaks.py)."""

from dataclasses import replace

import pytest

from cudalearn.chapters.ch06 import step_figures
from cudalearn.chapters.ch06.figures import peaks
from cudalearn.measure import gpus, stated, timing

STEP4 = "regblock_2d_prefetch"


def test_the_goal_sentence_reads_the_benchmark_and_a_faster_step_4_raises(capsys, monkeypatch):
    stored = timing.stored_results("bench.gemm.N4096")
    step_figures.goal(4096)
    out = " ".join(capsys.readouterr().out.split())
    assert f"step 4 ({STEP4}) reaches" in out and "meets the goal" in out and "H100" in out
    # a rerun where step 4 beats Triton FP32: "this chapter's four steps fall short" would be stale
    fast = [r | {"gflops": 2 * r["gflops"]} if r["name"] == STEP4 else r for r in stored.rows]
    monkeypatch.setattr(step_figures.timing, "stored_results", lambda key: replace(stored, rows=fast))
    with pytest.raises(stated.StaleProse, match="fall short of the goal"):
        step_figures.goal(4096)


def test_the_closing_sentence_names_each_share_and_raises_if_a_numba_kernel_passes_cublas():
    rows, _, header = peaks.stored_matmuls(("bench.gemm.N4096",))
    spec = gpus.spec_for(header["device"])
    peak = {"FP32": spec.fp32_tflops, "TF32": spec.fp16_tensor_tflops / 2}
    peak |= {"FP16": spec.fp16_tensor_tflops, "BF16": spec.fp16_tensor_tflops}
    sentence = peaks.takeaway(rows, peak, header["device"])
    assert "cuBLAS FP32" in sentence and "regblock_2d_async" in sentence and STEP4 in sentence
    cublas = next(r["tflops"] for r in rows if r["name"] == "cuBLAS FP32")
    faster = [r | {"tflops": 1.01 * cublas} if r["name"] == STEP4 else r for r in rows]
    with pytest.raises(AssertionError, match="came closer to the FP32 peak"):
        peaks.takeaway(faster, peak, header["device"])


def test_the_whole_kernel_share_times_issue_slots_predicts_each_step_and_a_noisy_median_is_flagged(capsys):
    prof, _ = step_figures.lookup("bench.gemm.N4096.ncu")
    w = step_figures.whole_kernel(prof, timing.stored_results("ch6.regblock"), 4096)
    assert w["share"][STEP4] < w["share"]["regblock_2d_warptile"] < w["share"]["regblock_2d_async"]
    assert all(abs(w["product"][k] - w["peak"][k]) < 0.04 for k in w["peak"]), w
    rows, _, header = peaks.stored_matmuls(("bench.gemm.N4096",))
    spec = gpus.spec_for(header["device"])
    peak = {"FP32": spec.fp32_tflops, "TF32": spec.fp16_tensor_tflops / 2}
    peak |= {"FP16": spec.fp16_tensor_tflops, "BF16": spec.fp16_tensor_tflops}
    sentence = peaks.takeaway(rows, peak, header["device"])  # the stored BF16 median is 11% above its min
    assert "cuBLAS BF16" in sentence and sentence.count("a noisy median") == 1


def test_06d_reads_step_4s_changes_and_the_small_layers_from_the_stored_runs(capsys):
    from cudalearn.chapters.ch06 import tc_figures

    tc_figures.step4_parts(4096)
    tc_figures.mlp_read_back()
    out = " ".join(capsys.readouterr().out.split())
    assert "17 variants" in out and "the 128 x 256 tile alone" in out and "for 132 SMs" in out


def test_the_transpose_estimate_is_a_few_percent_of_step_6(capsys):
    step_figures.transpose_share(4096, timing.stored_results("ch6.regblock"))
    out = " ".join(capsys.readouterr().out.split())
    assert "of step 6's" in out and "another run" in out


def test_the_transpose_closes_step_6s_gap_and_a_wider_gap_raises(capsys):
    timed = timing.stored_results("ch6.regblock")
    prof, _ = step_figures.lookup("bench.gemm.N4096.ncu")
    whole = step_figures.whole_kernel(prof, timed, 4096)
    step_figures.transpose_share(4096, timed, whole)
    out = " ".join(capsys.readouterr().out.split())
    assert "Without the estimated transpose" in out and "predicted" in out
    off = {k: dict(v) for k, v in whole.items()}
    off["product"]["regblock_2d_async"] += 0.05  # a prediction the transpose no longer explains
    with pytest.raises(stated.StaleProse, match="accounts for step 6's gap"):
        step_figures.transpose_share(4096, timed, off)


def test_a_pass_of_the_hot_loop_is_four_steps_along_k_for_steps_4_and_5_and_a_tile_for_step_6(capsys):
    res, _ = step_figures.lookup("ch6.regblock_resources")
    hot = step_figures.hot_loop_steps(res)
    assert hot == {STEP4: (4, 8), "regblock_2d_warptile": (4, 16), "regblock_2d_async": (16, 16)}
