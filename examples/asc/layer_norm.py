"""LayerNorm and RMSNorm over the last axis (H) of [R, H] rows, R split over the vector cores, each core's
rows in tiles of ``tile_rows`` rows, double buffered; gamma (and beta) copied in once. Half or float.

    python examples/asc/layer_norm.py
"""

from __future__ import annotations

import numpy as np

from npu_jax import asc

BUFFER_NUM = 2
EPS = 1e-5


@asc.kernel
def norm_rows(x, gamma, beta, y, rows: int, h: int, tile_rows: int, rms: bool):
    """``rms``: RmsNorm (beta unused); else LayerNorm."""
    per_block = rows // asc.get_block_num()
    tile = tile_rows * h
    dt = x.dtype
    xg, yg, gg, bg = (asc.GlobalTensor() for _ in range(4))
    xg.set_global_buffer(x + asc.get_block_idx() * per_block * h, per_block * h)
    yg.set_global_buffer(y + asc.get_block_idx() * per_block * h, per_block * h)
    gg.set_global_buffer(gamma, h)
    bg.set_global_buffer(beta, h)
    pipe = asc.TPipe()
    q_in, q_out = asc.TQue(asc.TPosition.VECIN, BUFFER_NUM), asc.TQue(asc.TPosition.VECOUT, BUFFER_NUM)
    params, stats = asc.TBuf(asc.TPosition.VECCALC), asc.TBuf(asc.TPosition.VECCALC)
    pipe.init_buffer(q_in, BUFFER_NUM, tile * dt.sizeof())
    pipe.init_buffer(q_out, BUFFER_NUM, tile * dt.sizeof())
    pipe.init_buffer(params, 2 * h * dt.sizeof())
    pipe.init_buffer(stats, 64 * dt.sizeof())  # the rows' means, then their variances (tile_rows <= 32)
    g, b = params.get(dt), params.get(dt)[h:]
    asc.data_copy(g, gg, h)
    asc.data_copy(b, bg, h)
    asc.set_flag(asc.HardEvent.MTE2_V, 0)
    asc.wait_flag(asc.HardEvent.MTE2_V, 0)

    @asc.loop(per_block // tile_rows)
    def _(i):
        x_local = q_in.alloc_tensor(dt)
        asc.data_copy(x_local, xg[i * tile :], tile)
        q_in.enque(x_local)
        x_local = q_in.deque(dt)
        y_local = q_out.alloc_tensor(dt)
        if rms:
            asc.rms_norm(y_local, x_local, g, EPS, asc.RmsNormTiling(1, tile_rows, h))
        else:
            s = stats.get(dt)
            asc.layer_norm(y_local, s, s[32:], x_local, g, b, EPS, asc.LayerNormTiling(1, tile_rows, h))
        q_out.enque(y_local)
        q_in.free_tensor(x_local)
        y_local = q_out.deque(dt)
        asc.data_copy(yg[i * tile :], y_local, tile)
        q_out.free_tensor(y_local)


def reference(x, gamma, beta, rms: bool):
    """LayerNorm / RMSNorm of every row in float64."""
    x, g, b = (v.astype(np.float64) for v in (x, gamma, beta))
    if rms:
        return x / np.sqrt((x**2).mean(-1, keepdims=True) + EPS) * g
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + EPS) * g + b


def main():
    import npu_jax

    rng = np.random.default_rng(0)
    x = rng.normal(0, 2, (40 * 32, 512)).astype(np.float16)
    g, b = (rng.uniform(0.5, 1.5, 512).astype(np.float16) for _ in range(2))
    for rms in (False, True):
        (*_, y), report = norm_rows[40](
            x, g, b, np.zeros_like(x), *x.shape, 8, rms, hw=npu_jax.presets.ascend910b()
        )
        print("RMSNorm" if rms else "LayerNorm", "max |error|:", np.abs(y - reference(x, g, b, rms)).max())
        print(report.summary())


if __name__ == "__main__":
    main()
