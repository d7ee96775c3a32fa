-- recipes/phi3.lua: the Phi-3 / Phi-3.5 decoder (Phi3ForCausalLM), as in Microsoft's model cards
-- and Hugging Face's modeling_phi3.py. Run it:  doppler recipes/phi3.lua --model PATH --help
--
-- Llama's layer with fused projections: one qkv_proj matrix makes q, k and v (rows: q heads,
-- then k heads, then v heads) and one gate_up_proj makes the MLP's gate and up halves. They are
-- used fused: one matrix product each, whose output columns are sliced (strided views, no
-- copies); RoPE, attention and the SwiGLU kernel read the slices in place. Pre-norm RMSNorm
-- x̂ · w; RoPE over partial_rotary_factor of each head; separate LM head.

local R = {
  name = "phi3",
  architectures = { "Phi3ForCausalLM", "phi3" },
  chat_template = "phi3",
}

function R.weights(cfg)
  local H, F, V = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
  local D, Hq, Hkv = cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads
  local w = {
    { "model.embed_tokens.weight", { V, H } },
    { "model.norm.weight", { H }, norm = true },
  }
  if not cfg.tie_word_embeddings then w[#w + 1] = { "lm_head.weight", { V, H } } end
  for i = 0, cfg.num_hidden_layers - 1 do
    local function add(name, shape, norm) w[#w + 1] = { ("model.layers.%d.%s"):format(i, name), shape, norm = norm } end
    add("input_layernorm.weight", { H }, true)
    add("self_attn.qkv_proj.weight", { (Hq + 2 * Hkv) * D, H })
    add("self_attn.o_proj.weight", { H, Hq * D })
    add("post_attention_layernorm.weight", { H }, true)   -- the pre-MLP norm
    add("mlp.gate_up_proj.weight", { 2 * F, H })
    add("mlp.down_proj.weight", { H, F })
  end
  return w
end

function R.forward(g, cfg, w, io)
  local D, Hq, Hkv, F = cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.intermediate_size
  local function norm(x, weight) return g:rmsnorm(x, w(weight), { eps = cfg.rms_norm_eps }) end
  local rope = io.rope_table { theta = cfg.rope_theta, scaling = cfg.rope_scaling }

  local x = g:embed(io.ids, w "model.embed_tokens.weight")
  for i = 0, cfg.num_hidden_layers - 1 do
    local function L(name) return ("model.layers.%d.%s"):format(i, name) end
    local window = cfg.layer_types[i + 1] == "sliding_attention" and cfg.sliding_window or nil

    -- attention: pre-norm, one fused qkv product sliced into q | k | v, RoPE, causal GQA, residual
    local h = norm(x, L "input_layernorm.weight")
    local qkv = g:linear(h, w(L "self_attn.qkv_proj.weight"))
    local q = g:slice(qkv, 0, Hq * D):heads(Hq)
    local k = g:slice(qkv, Hq * D, Hkv * D):heads(Hkv)
    local v = g:slice(qkv, (Hq + Hkv) * D, Hkv * D):heads(Hkv)
    q, k = g:rope(q, io.pos, rope), g:rope(k, io.pos, rope)
    local a = g:attention(q, k, v, io.pos, {
      cache = io.kv_cache(i, window), window = window, scale = D ^ -0.5,
    })
    x = x + g:linear(a:merge_heads(), w(L "self_attn.o_proj.weight"))

    -- MLP: pre-norm, one fused gate|up product, SwiGLU reading both halves in place, residual
    h = norm(x, L "post_attention_layernorm.weight")
    local gate_up = g:linear(h, w(L "mlp.gate_up_proj.weight"))
    local m = g:silu(g:slice(gate_up, 0, F)) * g:slice(gate_up, F, F)
    x = x + g:linear(m, w(L "mlp.down_proj.weight"))
  end

  x = norm(io.logits_rows(x), "model.norm.weight")
  return g:linear(x, w(cfg.tie_word_embeddings and "model.embed_tokens.weight" or "lm_head.weight"))
end

return require("doppler.recipe").define(R)
