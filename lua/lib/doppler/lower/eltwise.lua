-- doppler.lower.eltwise: element-wise ops (add, mul, scale, gelu_tanh, silu) and the logit softcap.
local Graph = require "doppler.graph"
local B = require "doppler.lower.base"
local M, R = B.M, B.M.rules
local groups_1d, numel = B.groups_1d, B.numel

R.softcap = function(ctx, n)
  local count = numel(n.bshape)
  local k = ctx.kernel("act/softcap.comp", ctx.defines(nil, n.etype), { WG = 256 })
  local gx, gy = groups_1d(count, 256)
  ctx.dispatch(k, gx, gy, 1, { x = ctx.t(n), n = count, c = n.attrs.arg })
end

-- Element-wise ops read strided slices in place (Phi-3's gate_up with fusion=off: silu(gate) * up): the
-- kernel maps element i of the [rows, cols] value to (i / cols) * stride + i % cols; the output is contiguous.
local ELTWISE = { add = 0, mul = 1, scale = 2, gelu_tanh = 3, silu = 4 }
for op, kind in pairs(ELTWISE) do
  R[op] = function(ctx, n)
    local a, b = n.inputs[1], n.inputs[2] or n.inputs[1]
    local count = numel(n.bshape)
    local cols = count // n.bshape[1]   -- a row is one token: what a slice's row_stride counts in
    local function stride_of(x)
      if not x.row_stride then return 0 end
      if numel(x.bshape) // x.bshape[1] ~= cols then
        Graph.fail("%s at %s: a strided input of shape [%s] does not have rows of %d elements", op, n.where,
                   table.concat(x.bshape, ", "), cols)
      end
      return x.row_stride
    end
    local k = ctx.kernel("graph/eltwise.comp", ctx.defines(), { WG = 256 })
    local gx, gy = groups_1d(count, 256)
    ctx.dispatch(k, gx, gy, 1, { a = ctx.t(a), b = ctx.t(b), y = ctx.t(n), n = count, kind = kind,
                                 s = n.attrs.arg or 1.0, cols = cols, a_stride = stride_of(a), b_stride = stride_of(b) })
  end
  M.strided[op] = { true, true }
end
