"""Chapter 4's padding figures printed beside its prose and checked against what the prose says (Chapter 4).

The book quotes the stored runs (padding doubled one pair of three on an H100; 16.5x and 5.7x the
wavefronts; the padded row-access loop's instruction mix). Each function prints those figures and
raises `stated.StaleProse` when a rerun no longer shows what the text says, so the sentence is reread.
"""

from __future__ import annotations

from typing import Any

from cudalearn.chapters.ch04 import compiled_loops
from cudalearn.measure import stated
from cudalearn.measure.reference import label, lookup

WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
BT = ("course_bt_32x32", "course_bt_32x33")  # the transposed-tile product, unpadded and padded, as profiled


def padding_speedup(rows: list[dict[str, Any]], plain: str, pad: str) -> float | None:
    """Speed of the padded kernel over the unpadded one, from the rows of one timed run; None without GPU."""
    ms = {row["name"]: row.get("median_ms") for row in rows}
    return ms[plain] / ms[pad] if ms.get(plain) and ms.get(pad) else None


def quoted(pairs: dict[str, tuple], tracer_ratio: float) -> None:
    """Print and check what the text says of the stored runs: which pair doubled, on which GPU, and the
    unpadded / padded wavefronts of the transposed-tile product (tracer `tracer_ratio`, Nsight Compute)."""
    stored = {}
    for name, (results, _reports, plain, pad) in pairs.items():
        figures, run = lookup(results.key)
        stored[name] = padding_speedup(figures["rows"], plain, pad), run
    doubled = [name for name, (speedup, _) in stored.items() if speedup >= 2]
    devices = {run["device"] for _, run in stored.values()}
    print(f"doubled on the stored run: {', '.join(doubled)} ({', '.join(sorted(devices))})")
    profile, profiled = lookup("ch4.ncu_compare")
    ncu = {p: profile["patterns"][p]["ncu"][WAVEFRONTS] for p in BT}
    print(f"wavefronts, unpadded / padded transposed-tile product: tracer {tracer_ratio:.1f},")
    print(f"  Nsight Compute {ncu[BT[0]]:,} / {ncu[BT[1]]:,} = {ncu[BT[0]] / ncu[BT[1]]:.1f}")
    stated.check(
        stored,
        f"{'; '.join(label(r) for _, r in stored.values())}; {label(profiled)}",
        lambda s: (
            doubled == ["matmul, transposed B tile"]
            and all("H100" in d for d in devices)
            and f"{tracer_ratio:.1f}" == "16.5"
            and ncu == {BT[0]: 69632, BT[1]: 12288}
            and "H200" in profiled["device"]
        ),
        "padding doubled one pair of three on an H100; 16.5x the wavefronts (tracer), 69,632 against "
        "12,288 on an H200",
    )


def loops(loops: dict[str, Any], loops_from: str, mm_results: Any) -> None:
    """Print the hot loops' instruction mix and the padded row access's slowdown; check the text after it.

    It says: the listing and the timing come from one run; the unpadded loops and the padded
    transposed-tile product's hold 32 FFMA, the padded row access 8; the padded row access's loop issues
    several times the instructions per FFMA, more than its slowdown; it has no 128-bit load where the
    unpadded one has some."""
    print(f"SASS of each product's hot loop:\n{stated.wrap(loops_from)}")
    print(*compiled_loops.table_lines(loops), sep="\n")
    print(f"\nthe hot loop of {compiled_loops.LISTED}, its first 16 instructions:")
    for line in loops[compiled_loops.LISTED]["loop_lines"][:16]:
        print("   ", f"{line[:46]:<47}{compiled_loops.note(line)}")
    slower = padding_speedup(mm_results.rows, "matmul_tiled32_padded", "matmul_tiled32")
    per = {k: compiled_loops.per_ffma(v) for k, v in loops.items()}
    ffma = {k: v["loop"]["FFMA"] for k, v in loops.items()}
    print(f"\npadded row access: {slower:.1f}x slower,\n  timed on {mm_results.label}")
    stated.check(
        loops,
        loops_from,
        lambda f: (
            mm_results.label in loops_from
            and ffma["matmul_tiled32"] == ffma["matmul_bt_tiled32"] == ffma["matmul_bt_tiled32_padded"] == 32
            and ffma["matmul_tiled32_padded"] == 8
            and slower < per["matmul_tiled32_padded"] / per["matmul_tiled32"]
            and per["matmul_tiled32_padded"] > 3 * per["matmul_tiled32"] > 0
            and f["matmul_tiled32"]["loop"]["lds128"] > 0 == f["matmul_tiled32_padded"]["loop"]["lds128"]
        ),
        "one run; 32 FFMA a loop unpadded and in the padded transposed-tile product, 8 in the padded row "
        "access; several times the instructions per FFMA, more than the slowdown; no 128-bit load in the "
        "padded row access's loop",
    )
