-- recipes/qwen2.lua: the Qwen 2 / Qwen 2.5 decoder (Qwen2ForCausalLM), as in the Qwen model cards
-- and Hugging Face's modeling_qwen2.py. Run it:  doppler recipes/qwen2.lua --model PATH --help
--
-- Llama's layer with one difference: the q, k and v projections carry a bias (o_proj does not).
-- Pre-norm RMSNorm x̂ · w; grouped-query attention with RoPE (theta 1e6, no scaling); SwiGLU MLP.
-- The LM head is tied on the small models (0.5B...) and separate on the larger ones.
-- Sliding-window attention exists in the config (use_sliding_window) but the released models
-- turn it off; the normalised config's layer_types says which layers would use it.

local R = {
  name = "qwen2",
  architectures = { "Qwen2ForCausalLM", "qwen2" },
  chat_template = "chatml",
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
    add("self_attn.q_proj.weight", { Hq * D, H })
    add("self_attn.q_proj.bias", { Hq * D })
    add("self_attn.k_proj.weight", { Hkv * D, H })
    add("self_attn.k_proj.bias", { Hkv * D })
    add("self_attn.v_proj.weight", { Hkv * D, H })
    add("self_attn.v_proj.bias", { Hkv * D })
    add("self_attn.o_proj.weight", { H, Hq * D })
    add("post_attention_layernorm.weight", { H }, true)   -- the pre-MLP norm
    add("mlp.gate_proj.weight", { F, H })
    add("mlp.up_proj.weight", { F, H })
    add("mlp.down_proj.weight", { H, F })
  end
  return w
end

function R.forward(g, cfg, w, io)
  local Hq, Hkv = cfg.num_attention_heads, cfg.num_key_value_heads
  local function norm(x, weight) return g:rmsnorm(x, w(weight), { eps = cfg.rms_norm_eps }) end
  local rope = io.rope_table { theta = cfg.rope_theta, scaling = cfg.rope_scaling }

  local x = g:embed(io.ids, w "model.embed_tokens.weight")
  for i = 0, cfg.num_hidden_layers - 1 do
    local function L(name) return ("model.layers.%d.%s"):format(i, name) end
    local window = cfg.layer_types[i + 1] == "sliding_attention" and cfg.sliding_window or nil

    -- attention: pre-norm, biased q/k/v projections, RoPE, causal GQA, output projection, residual
    local h = norm(x, L "input_layernorm.weight")
    local q = g:linear(h, w(L "self_attn.q_proj.weight"), w(L "self_attn.q_proj.bias")):heads(Hq)
    local k = g:linear(h, w(L "self_attn.k_proj.weight"), w(L "self_attn.k_proj.bias")):heads(Hkv)
    local v = g:linear(h, w(L "self_attn.v_proj.weight"), w(L "self_attn.v_proj.bias")):heads(Hkv)
    q, k = g:rope(q, io.pos, rope), g:rope(k, io.pos, rope)
    local a = g:attention(q, k, v, io.pos, {
      cache = io.kv_cache(i, window), window = window, scale = cfg.head_dim ^ -0.5,
    })
    x = x + g:linear(a:merge_heads(), w(L "self_attn.o_proj.weight"))

    -- MLP: pre-norm, SwiGLU, residual
    h = norm(x, L "post_attention_layernorm.weight")
    local m = g:silu(g:linear(h, w(L "mlp.gate_proj.weight"))) * g:linear(h, w(L "mlp.up_proj.weight"))
    x = x + g:linear(m, w(L "mlp.down_proj.weight"))
  end

  x = norm(io.logits_rows(x), "model.norm.weight")
  return g:linear(x, w(cfg.tie_word_embeddings and "model.embed_tokens.weight" or "lm_head.weight"))
end

return require("doppler.recipe").define(R)
