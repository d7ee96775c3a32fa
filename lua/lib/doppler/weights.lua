-- doppler.weights: a model's tensors onto the device, checked against what the recipe expects.
-- Every weight the recipe lists must exist with that shape (a missing or mis-shaped tensor is
-- named). Float weights take the device type the hints ask for; quantised GGUF types whose blocks
-- a GPU kernel decodes (doppler.lower's quant_types) stay as they are (weight_quant=keep), others
-- are dequantised on the way (CPU reference). A quantised embedding table stays quantised too: the
-- gather kernel decodes it (embed/gather_q.comp), and a tied LM head reads the same blocks.
-- Quantised matrices kept as blocks are stored in the layout q_layout / q4k_layout name
-- (docs/QUANTIZATION.md "Weight layouts"; recorded with doppler.lower.set_layout for the kernels). q_layout=auto
-- (the default) is flat on devices with at least 16 GiB of device memory, where flat was measured faster, and
-- row_wise elsewhere; that flat is made on the device from the uploaded row_wise blocks (M.repack_flat), not on
-- the CPU through the cache that an explicit q_layout=flat uses.
--
-- GGUF models: recipes name weights the HF way; the model file resolves those names to GGUF ones
-- (core/formats/tensor_names.h), and shapes are reported row-major either way. A recipe entry
-- marked gguf_rope_heads = H is a q/k projection that llama.cpp's converter stores with its rows
-- in interleaved RoPE pair order (Llama and Mistral); for a GGUF those rows are put back in HF's
-- half-split order on upload (dev:upload_model_tensor's deinterleave_heads), so the recipe and
-- the RoPE kernel are the same for both file kinds.
--
-- Padded rows (doppler convert --pad-k; core/formats/model_file.h checks the doppler.pad_k.* metadata): the
-- model reports such a tensor with its logical shape [N, K] (padded_cols = the stored row length), so the
-- recipe check below is the ordinary one. Kept as blocks, the device tensor holds the stored rows and
-- doppler.lower.set_padded records K for the kernels; converted to a float type, the padding is dropped on
-- upload.
local lower = require "doppler.lower"

local M = {}


-- The device dtype of a float weight: precision=f32 -> f32; weight_dtype=X -> X; auto -> f16 for
-- f32 files (half the bytes, as a user running in f16 expects) and as stored for f16/bf16.
-- Norm weights (entries marked norm = true, and other 1-D tensors of recipes that mark none) stay
-- f32: they are small and sit inside an f32 computation. A bias (1-D, not a norm) takes its
-- matrix's type: the matrix kernels read it with the weight type (DP_BIAS).
local function device_dtype(file_dtype, ndim, h, is_norm, name)
  if ndim == 2 and lower.quant_types[file_dtype] and h:get("weight_quant") == "keep" then
    return file_dtype
  end
  if h:get("precision") == "f32" then return "f32" end
  if is_norm then return "f32" end
  local want = h:get("weight_dtype")
  if want ~= "auto" then return want end
  if file_dtype == "f16" or file_dtype == "bf16" then return file_dtype end
  return "f16"
end

-- q_layout=auto on a device (its caps): flat where the device has at least 16 GiB of device memory, row_wise
-- elsewhere. Why: on the H100 flat read the blocks that stay in blocks there (q_matmul's auto keeps gate+up
-- and a Q8_0 LM head in blocks beside the f16 copies) with 128-bit loads where row_wise needs 16-bit ones (Q4_K
-- and Q5_K aside): Gemma 3 1B Q4_K_M decode 1.04x, Llama 3.2 1B 1.02x (docs/BENCHMARKS.md 21h). Smaller
-- devices (lavapipe, where the tests run) keep the file's order; ask for flat there with q_layout=flat.
function M.auto_layout(caps)
  if not caps then error("doppler.weights: q_layout=auto needs the device's caps (dev:caps())", 3) end
  return (caps.device_local_bytes or 0) >= (16 << 30) and "flat" or "row_wise"
end

-- The layout a quantised matrix kept as blocks is stored in: q4k_layout for Q4_K unless auto, else
-- q_layout (auto: M.auto_layout of the device's caps). Anything else (float, 1-D, the parts of a stack, which
-- the expert kernels read row_wise) stays row_wise. Second result: whether the layout came from auto.
function M.layout_for(dtype, ndim, h, caps)
  if ndim ~= 2 or not lower.quant_types[dtype] then return "row_wise", false end
  if dtype == "q4_k" and h:get("q4k_layout") ~= "auto" then return h:get("q4k_layout"), false end
  local l = h:get("q_layout")
  if l == "auto" then return M.auto_layout(caps), true end
  return l, false
end

-- A quantised tensor uploaded row_wise, repacked into the flat layout on the device (quant/repack_flat.comp: one
-- pass over its bytes; core/quant_layout.c's dp_qlayout_pack gives the same bytes on the CPU). Returns the new
-- tensor (row_wise t is released), with its padded row length, if any, carried over.
function M.repack_flat(dev, t)
  local out = dev:tensor { dtype = t:dtype(), shape = t:shape() }
  local logical = lower.logical_shape(t)
  if logical[#logical] ~= t:shape()[#t:shape()] then lower.set_padded(out, logical[#logical]) end
  local k = dev:kernel { file = "quant/repack_flat.comp", defines = { lower.quant_types[t:dtype()] },
                         constants = { WG = 256 } }
  local words = t:nbytes() // 2
  local gx, gy = lower.groups_1d(words, 256)
  local rec = dev:recorder()
  rec:dispatch(k, { gx, gy, 1 }, { src = t, dst = out, n_words = words })
  rec:run()
  t:release()
  return out
end

local function shape_str(s) return "[" .. table.concat(s, ", ") .. "]" end

function M.load(dev, recipe, model, cfg, h, progress)
  local expected = recipe.weights(cfg)
  local caps = dev:caps()
  local gguf = model:kind() == "gguf"
  local out, info = {}, { bytes = 0, count = 0, layouts = {}, layout_cache_hits = 0 }
  local function upload(e, dt, layout, on_device)
    local opts = {}
    if gguf and e.gguf_rope_heads then opts.deinterleave_heads = e.gguf_rope_heads end
    if layout and layout ~= "row_wise" and not on_device then
      opts.layout, opts.cache = layout, h:get("q_layout_cache") == "on"
    end
    local t, from = dev:upload_model_tensor(model, e[1], dt, opts)
    local mt = model:tensor(e[1])
    if mt.padded_cols and dt == mt.dtype then lower.set_padded(t, mt.shape[#mt.shape]) end
    if on_device and layout == "flat" then
      t = M.repack_flat(dev, t)
      opts.layout = layout
    end
    if opts.layout then
      lower.set_layout(t, layout)
      info.layouts[e[1]] = layout
      if from == "cache" then info.layout_cache_hits = info.layout_cache_hits + 1 end
    end
    return t
  end
  local problems = {}
  for _, e in ipairs(expected) do
    local name, shape = e[1], e[2]
    local t = model:tensor(name)
    if not t then
      problems[#problems + 1] = ("missing tensor %s %s"):format(name, shape_str(shape))
    else
      local ok = #t.shape == #shape
      for i = 1, #shape do ok = ok and t.shape[i] == shape[i] end
      if not ok then
        local msg = ("tensor %s has shape %s, the config implies %s"):format(name, shape_str(t.shape), shape_str(shape))
        local want, have = shape[#shape], t.shape[#t.shape]
        if #t.shape == #shape and want and have == (want + 255) // 256 * 256 and have ~= want then
          msg = msg .. " (rows padded to 256, but the file's doppler.pad_k.tensors does not list it)"
        end
        problems[#problems + 1] = msg
      end
    end
  end
  if #problems > 0 then
    local shown = {}
    for i = 1, math.min(#problems, 8) do shown[i] = "  " .. problems[i] end
    if #problems > 8 then shown[#shown + 1] = ("  ... and %d more"):format(#problems - 8) end
    error(("%s: does not match the %s recipe:\n%s"):format(model:path(), recipe.name, table.concat(shown, "\n")), 0)
  end
  local marks_norms = false
  for _, e in ipairs(expected) do marks_norms = marks_norms or e.norm end
  local stacks = M.plan_stacks(expected, model)
  for i, e in ipairs(expected) do
    local name = e[1]
    local t = model:tensor(name)
    local dt = device_dtype(t.dtype, #t.shape, h, e.norm or (#t.shape == 1 and not marks_norms), name)
    if e.stack then
      local st = stacks[e.stack[1]]
      st.parts[e.stack[2]] = upload(e, dt)
      st.have = st.have + 1
      if st.have == st.count then
        out[st.name] = M.stack(dev, st)
        info.bytes = info.bytes + out[st.name]:nbytes()
        info.count = info.count + 1
      end
    else
      out[name] = upload(e, dt, M.layout_for(dt, #t.shape, h, caps))
      info.bytes = info.bytes + out[name]:nbytes()
      info.count = info.count + 1
    end
    if name == "model.embed_tokens.weight" or i == 1 then info.embed_file_dtype = t.dtype end
    if progress then progress(i, #expected, name) end
  end
  return out, info
end

-- Stacked weights. A recipe entry { name, shape, stack = { STACK, index } } puts the file tensor
-- `name` at position `index` (0-based) of the device tensor STACK [count, shape...], which the
-- recipe then uses as w(STACK): e.g. a mixture of experts' per-expert matrices become one
-- [E, N, K] tensor that one kernel indexes by expert id. The parts are not kept on the device.
-- Every index 0..count-1 must be given once, with one shape and one file dtype.
function M.plan_stacks(expected, model)
  local stacks = {}
  for _, e in ipairs(expected) do
    if e.stack then
      local sname, idx = e.stack[1], e.stack[2]
      if type(sname) ~= "string" or math.type(idx) ~= "integer" or idx < 0 then
        error(("%s: stack = { NAME, index >= 0 } expected"):format(e[1]), 0)
      end
      local st = stacks[sname]
      if not st then
        st = { name = sname, shape = e[2], dtype = model:tensor(e[1]).dtype, parts = {}, seen = {}, count = 0, have = 0 }
        stacks[sname] = st
      end
      if st.seen[idx] then error(("stack %s: index %d is given twice (%s, %s)"):format(sname, idx, st.seen[idx], e[1]), 0) end
      if shape_str(e[2]) ~= shape_str(st.shape) or model:tensor(e[1]).dtype ~= st.dtype then
        error(("stack %s: %s %s %s differs from the first part's %s %s"):format(sname, e[1], shape_str(e[2]),
              model:tensor(e[1]).dtype, shape_str(st.shape), st.dtype), 0)
      end
      st.seen[idx] = e[1]
      st.count = math.max(st.count, idx + 1)
    end
  end
  for sname, st in pairs(stacks) do
    for i = 0, st.count - 1 do
      if not st.seen[i] then error(("stack %s: part %d of %d is not listed"):format(sname, i, st.count), 0) end
    end
  end
  return stacks
end

-- Copies the uploaded parts into one device tensor (copy kernel, one recording) and frees them.
function M.stack(dev, st)
  local first = st.parts[0]
  local shape = { st.count }
  for _, d in ipairs(first:shape()) do shape[#shape + 1] = d end
  local out = dev:tensor { dtype = first:dtype(), shape = shape }
  local logical = lower.logical_shape(first)
  if logical[#logical] ~= shape[#shape] then lower.set_padded(out, logical[#logical]) end
  local bytes = first:nbytes()
  local k = dev:kernel { file = "copy/copy.comp", constants = { WG = 256 } }
  local rec = dev:recorder()
  for i = 0, st.count - 1 do
    local groups = math.max(1, math.min(65535, (bytes + 16 * 256 * 4 - 1) // (16 * 256 * 4)))
    rec:dispatch(k, { groups, 1, 1 }, {
      src = st.parts[i], dst = out:view { offset = i * bytes, dtype = first:dtype(), shape = first:shape() }, bytes = bytes,
    })
  end
  rec:run()
  for i = 0, st.count - 1 do st.parts[i]:release() end
  st.parts = {}
  return out
end

return M
