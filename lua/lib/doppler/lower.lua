-- doppler.lower: one rule per op, turning a planned node into kernel dispatches. The kernel
-- contracts (push members, dispatch shape, defines) are in each shader's header comment; the
-- op semantics in docs/OPS.md. A rule gets the context (kernels, dispatch, tensors, types) and
-- the node, whose inputs already have device tensors (ctx.t(node)).
-- The rules live by concept in lower/*.lua, each adding to the one table this module returns
-- (lower/base.lua makes it):
--   base       the rule table, the context, type defines, weight layouts and padded rows, helpers
--   cpu        a CPU device's defaults and llvmpipe's loop bound
--   norm       the embedding lookup and the RMSNorm family
--   prepare    q_matmul's forms of quantised weights, weight preparations (f16 copies, down's columns)
--   gemv       the matrix-vector kernels' geometry and int8 x, gemv_multi
--   linear     linear (GEMV, GEMM, gemm_cm) and the fused q/k/v projections
--   attention  RoPE, attention (decode, prefill, basic), the KV cache, rope_kv
--   mlp        glu, gate+up in one pass, the fused MLP (glu_down)
--   moe, eltwise, sample, head   experts; element-wise ops and softcap; argmax and the sampler; the fused LM head
-- Later files use earlier ones (the order below), never the other way round.
local B = require "doppler.lower.base"
for _, part in ipairs { "cpu", "norm", "prepare", "gemv", "linear", "attention", "mlp", "moe", "eltwise", "sample",
                        "head" } do
  require("doppler.lower." .. part)
end
return B.M
