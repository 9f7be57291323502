"""Chapter 6's claims (chapters/ch06/claims.py) read the stored H100 run and label each value with it."""

from cudalearn.chapters.ch06 import claims as ch6
from cudalearn.measure import reference
from cudalearn.measure.sources import row


def test_every_claim_names_its_run_and_judges_it():
    errors = {"FP32": 0.0, "TF32": 3e-4, "FP16": 3e-4, "BF16": 2.4e-3}
    items = ch6.core(errors) + ch6.warp_tiling(4096) + ch6.autocast_and_autotuning("NVIDIA H100 80GB HBM3")
    untested = [c.claim for c in items if c.holds is None]  # 6a's: the stored runs do not isolate it
    assert untested == ["A large warp tile maximizes data reuse within the warp"], untested
    for c in items:
        claim, _source, measured, on, verdict = row(c)
        assert measured != "not measured", claim
        assert on != "this notebook" and ("H100" in on or "NumPy on the CPU" in on), (claim, on)
        judged = ("see note: no verdict: ",) if c.holds is None else ("holds", "does not hold")
        assert verdict.startswith(judged), (claim, verdict)


def test_wavefronts_per_fma_reads_the_stored_profile():
    prof, _ = reference.lookup("bench.gemm.N4096.ncu")
    step4 = ch6.wavefronts_per_fma(prof, "regblock_2d_prefetch", 4096)
    step5 = ch6.wavefronts_per_fma(prof, "regblock_2d_warptile", 4096)
    assert round(step4, 3) == 0.188 and round(step5, 3) == 0.156  # 12 and 20 wavefronts a k-step per warp
