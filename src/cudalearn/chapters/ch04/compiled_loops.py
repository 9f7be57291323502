"""What the compiler made of the tiled products' inner loops, padded and unpadded (Chapter 4).

On a GPU, `measure` lists the machine code (SASS) Numba linked for each kernel that ran and
keeps its hot loop's instruction mix, and the hot loop itself for the padded row-access product;
Chapter 4 stores it as the figure `ch4.compiled_loops` and reads it back under the simulator.
"""

from cudalearn.compile import toolchain

KERNELS = ("matmul_tiled32", "matmul_tiled32_padded", "matmul_bt_tiled32", "matmul_bt_tiled32_padded")
LISTED = "matmul_tiled32_padded"  # the kernel whose hot loop the chapter shows


def measure(kernels):
    """{name: hot-loop instruction mix (and, for LISTED, its lines)} of kernels that ran on this GPU."""
    out = {}
    for name, kernel in kernels.items():
        sass = toolchain.kernel_sass(kernel)
        entry = {"loop": toolchain.instruction_mix(sass)["loop"]}
        if name == LISTED:
            entry["loop_lines"] = toolchain.hot_loop(sass)
        out[name] = entry
    return out


def per_ffma(entry):
    """Instructions the hot loop issues per FFMA (its multiply-adds), from one kernel's entry."""
    loop = entry["loop"]
    return loop["instructions"] / loop["FFMA"]


def table_lines(stored):
    """One line per kernel: the hot loop's FFMAs, shared loads (and how many are 128-bit), all
    instructions, and instructions per FFMA."""
    head = f"{'kernel':<26}{'FFMA':>6}{'LDS':>6}{'of them 128-bit':>17}{'instructions':>14}{'per FFMA':>10}"
    lines = [head]
    for name in KERNELS:
        loop = stored[name]["loop"]
        lines.append(
            f"{name:<26}{loop['FFMA']:>6}{loop['LDS']:>6}{loop['lds128']:>17}{loop['instructions']:>14}"
            f"{per_ffma(stored[name]):>10.1f}"
        )
    return lines


NOTES = (  # (what a SASS line contains, what it does in the padded loop), first match wins
    ("LDS", "<- a shared load (sA or sB)"),
    ("FFMA", "<- the multiply-add"),
    ("0x80000000", "<- the index's sign bit"),
    ("SHF.R.S32.HI", "<- sign of the index: all ones if negative"),
    ("LOP3.LUT", "<- AND: 33 if the index is negative, else 0"),
    ("0x21", "<- times 33, the padded row length"),
    (".EX", "<- a 64-bit compare (high half)"),
    ("ISETP.NE.U32", "<- a 64-bit compare (low half)"),
    ("IMAD.IADD", "<- an add (a multiply-add by 1)"),
    ("LEA.HI", "<- + 32 if the index is negative"),
    ("LEA ", "<- a shared address: base + 4 x index"),
    ("SEL", "<- the 64-bit loop counter's select"),
)


def note(line):
    """A short gloss of one SASS line of the padded loop, for the chapter's listing ('' if none)."""
    return next((text for key, text in NOTES if key in line), "")
