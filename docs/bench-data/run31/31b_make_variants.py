#!/usr/bin/env python3
"""Run 31b (session 24): timing-only variants of gemv_q's int8-activation path (DP_XQ8), to bound where
its time goes. Each variant is a copy of the tree's lua, recipes, shaders and models (git archive HEAD) with
one edit; B, C and D compute wrong values (gemv.lua's check then fails after timing), F is exact.
  .abB  NOSTAGE: stage_x8 stores a constant group instead of loading and quantising x
  .abC  NODOT:   x8_half_acc uses the codes and scales but no x (no shared-memory read, no dot product)
  .abD  both
  .abF  Q5_0's fifth bits spread to their bytes by one multiply (exact; a candidate)
"""
import os, subprocess, sys

def tree(name):
    if os.path.isdir(name):
        subprocess.run(["rm", "-rf", name], check=True)
    os.makedirs(name)
    a = subprocess.run(["git", "archive", "HEAD", "lua", "recipes", "shaders", "models"], check=True,
                       capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", name], input=a, check=True)

def edit(path, old, new):
    s = open(path).read()
    if s.count(old) != 1:
        sys.exit("%s: %r found %d times" % (path, old, s.count(old)))
    open(path, "w").write(s.replace(old, new))

STAGE_OLD = """        float v[16];
        if (vec) x_unpack16(x_fetch16(xrow, 16u * g), v);
        else     x16_elements(xrow, 16u * g, v);
        x8s[t * XG + g] = x8_quantise16(v);"""
STAGE_NEW = """        x8group z;
        [[unroll]] for (uint pp = 0u; pp < DP_XQ8_PLANES; ++pp) z.q[pp] = uvec4(i * 0x01010101u);
        z.ds = vec4(1.0, 0.0, 0.0, 0.0);
        x8s[t * XG + g] = z;"""
DOT_OLD = """    float dot = xg.ds.x * float(x8_dot16(c, xg.q[0]));
#if DP_XQ8_PLANES == 2
    dot = fma(xg.ds.y, float(x8_dot16(c, xg.q[1])), dot);
#endif
    return fma(a, dot, fma(b, xg.ds.z, acc));"""
DOT_NEW = """    return fma(a, float(bitCount(c.x ^ c.y ^ c.z ^ c.w)), b + acc + xg.ds.w);"""
Q5_OLD = """        c[i] |= ((n & 1u) | ((n & 2u) << 7) | ((n & 4u) << 14) | ((n & 8u) << 21)) << 4;"""
Q5_NEW = """        c[i] |= (n * 0x02040810u) & 0x10101010u;"""

for name, edits in ((".abB", ["stage"]), (".abC", ["dot"]), (".abD", ["stage", "dot"]), (".abF", ["q5"])):
    tree(name)
    for e in edits:
        if e == "stage": edit(name + "/shaders/matmul/gemv_q.comp", STAGE_OLD, STAGE_NEW)
        if e == "dot":   edit(name + "/shaders/include/dp_quant_x8.glsl", DOT_OLD, DOT_NEW)
        if e == "q5":    edit(name + "/shaders/include/dp_quant_x8.glsl", Q5_OLD, Q5_NEW)
    print(name, edits)
