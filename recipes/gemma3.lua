-- recipes/gemma3.lua: the Gemma 3 text decoder (Gemma3ForCausalLM), as in Google's model card
-- and Hugging Face's modeling_gemma3.py. Run it:  doppler recipes/gemma3.lua --help
--
-- Per layer: RMSNorm before and after both attention and MLP ("sandwich" norms), all of the
-- Gemma form x̂ · (1 + w); q/k RMSNorm per head before RoPE; grouped-query attention, sliding
-- window on local layers (5 of every 6) and global attention on the rest, each with its own
-- RoPE base; GeGLU MLP with tanh-approximated GELU; embeddings scaled by √hidden and tied to
-- the LM head.

local R = {
  name = "gemma3",
  architectures = { "Gemma3ForCausalLM", "Gemma3TextModel", "gemma3", "gemma3_text" },
  chat_template = "gemma3",
  -- Made by the README's set-up command: Gemma 3 270M shapes, seeded random weights (noise by design).
  default_model = "models/synthetic/gemma-3-270m",
  -- A checkpoint converted by llama.cpp stores norms with the +1 already added.
  norm_offset = function(model) return model.kind == "gguf" and 0 or 1 end,
}

-- Every weight and its shape, from the config. `doppler synth` makes a model from this list,
-- and loading checks a checkpoint against it (a missing or mis-shaped tensor is named).
function R.weights(cfg)
  local H, F, V = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
  local D, Hq, Hkv = cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads
  local w = {
    { "model.embed_tokens.weight", { V, H } },
    { "model.norm.weight", { H }, norm = true },
  }
  for i = 0, cfg.num_hidden_layers - 1 do
    local function add(name, shape, norm) w[#w + 1] = { ("model.layers.%d.%s"):format(i, name), shape, norm = norm } end
    add("input_layernorm.weight", { H }, true)
    add("self_attn.q_proj.weight", { Hq * D, H })
    add("self_attn.k_proj.weight", { Hkv * D, H })
    add("self_attn.v_proj.weight", { Hkv * D, H })
    add("self_attn.q_norm.weight", { D }, true)
    add("self_attn.k_norm.weight", { D }, true)
    add("self_attn.o_proj.weight", { H, Hq * D })
    add("post_attention_layernorm.weight", { H }, true)
    add("pre_feedforward_layernorm.weight", { H }, true)
    add("mlp.gate_proj.weight", { F, H })
    add("mlp.up_proj.weight", { F, H })
    add("mlp.down_proj.weight", { H, F })
    add("post_feedforward_layernorm.weight", { H }, true)
  end
  return w
end

-- The forward pass over this pass's tokens. `w(name)` is a weight, `io` holds the inputs
-- (ids, pos), RoPE tables, KV caches and `io.logits_rows` (all rows or the last one).
function R.forward(g, cfg, w, io)
  local Hq, Hkv = cfg.num_attention_heads, cfg.num_key_value_heads
  local function norm(x, weight)
    return g:rmsnorm(x, w(weight), { eps = cfg.rms_norm_eps, offset = io.norm_offset })
  end
  -- RoPE: local layers use rope_local_base_freq and no scaling; global layers rope_theta and
  -- the config's scaling (linear x8 on the 4B+ models).
  local rope_local = io.rope_table { theta = cfg.rope_local_theta }
  local rope_global = io.rope_table { theta = cfg.rope_theta, scaling = cfg.rope_scaling }

  -- HF casts √hidden to the weights' dtype before multiplying (34.0 rather than 33.94 in bf16).
  local x = g:embed(io.ids, w "model.embed_tokens.weight",
                    { scale = io.round_to_weight_dtype(math.sqrt(cfg.hidden_size)) })

  for i = 0, cfg.num_hidden_layers - 1 do
    local function L(name) return ("model.layers.%d.%s"):format(i, name) end
    local global = cfg.layer_types[i + 1] == "full_attention"
    local window = (not global) and cfg.sliding_window or nil

    -- attention: pre-norm, q/k norm per head, RoPE, attention, post-norm, residual
    local h = norm(x, L "input_layernorm.weight")
    local q = norm(g:linear(h, w(L "self_attn.q_proj.weight")):heads(Hq), L "self_attn.q_norm.weight")
    local k = norm(g:linear(h, w(L "self_attn.k_proj.weight")):heads(Hkv), L "self_attn.k_norm.weight")
    local v = g:linear(h, w(L "self_attn.v_proj.weight")):heads(Hkv)
    local rope = global and rope_global or rope_local
    q, k = g:rope(q, io.pos, rope), g:rope(k, io.pos, rope)
    local a = g:attention(q, k, v, io.pos, {
      cache = io.kv_cache(i, window),
      window = window,
      scale = cfg.query_pre_attn_scalar ^ -0.5,
      softcap = cfg.attn_logit_softcapping,
    })
    x = x + norm(g:linear(a:merge_heads(), w(L "self_attn.o_proj.weight")), L "post_attention_layernorm.weight")

    -- MLP: pre-norm, GeGLU (tanh GELU on the gate), post-norm, residual
    h = norm(x, L "pre_feedforward_layernorm.weight")
    local m = g:gelu_tanh(g:linear(h, w(L "mlp.gate_proj.weight"))) * g:linear(h, w(L "mlp.up_proj.weight"))
    x = x + norm(g:linear(m, w(L "mlp.down_proj.weight")), L "post_feedforward_layernorm.weight")
  end

  x = norm(io.logits_rows(x), "model.norm.weight")
  local logits = g:linear(x, w "model.embed_tokens.weight")   -- tied LM head
  if cfg.final_logit_softcapping then logits = g:softcap(logits, cfg.final_logit_softcapping) end
  return logits
end

-- Decoding: prefill the prompt, then step -> sample -> stop check (<eos>, <end_of_turn>, or max_tokens).
-- With hint decode_chunk = N > 1, the GPU runs that loop itself for N steps per submit (doppler.loop:
-- sampling and the stop check happen inside the recorded chunk) and the ids arrive chunk by chunk;
-- with N = 1, or when every logits row is wanted (--logits-out), each step is its own submit.
function R.decode(s, prompt, opts, emit)
  local generate = require "doppler.generate"
  s:feed(prompt, opts.all_logits, opts.on_logits)
  if not generate.chunked(s, opts) then return generate.steps(s, opts, emit) end
  for ids in generate.chunks(s, opts) do
    for _, id in ipairs(ids) do emit(id) end
  end
end

return require("doppler.recipe").define(R)
