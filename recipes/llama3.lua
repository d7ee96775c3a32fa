-- recipes/llama3.lua: the Llama 3.x decoder (LlamaForCausalLM), as in Meta's model card and Hugging
-- Face's modeling_llama.py. Run it:  doppler recipes/llama3.lua --model PATH --help
--
-- Per layer: RMSNorm x̂ · w before attention and before the MLP (pre-norm, two per layer);
-- grouped-query attention with RoPE, whose frequencies Llama 3.1+ rescale band by band
-- ("llama3" rope scaling: long wavelengths / factor, short ones kept, a smooth ramp between);
-- SwiGLU MLP; no biases. The LM head is tied to the embeddings on the 1B/3B models and separate
-- (lm_head.weight) on the larger ones: the config says which.

local R = {
  name = "llama3",
  architectures = { "LlamaForCausalLM", "llama" },
  chat_template = "llama3",
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
    local function add(name, shape, norm)
      w[#w + 1] = { ("model.layers.%d.%s"):format(i, name), shape, norm = norm }
      return w[#w]
    end
    add("input_layernorm.weight", { H }, true)
    add("self_attn.q_proj.weight", { Hq * D, H }).gguf_rope_heads = Hq   -- llama.cpp pairs RoPE rows: see doppler.weights
    add("self_attn.k_proj.weight", { Hkv * D, H }).gguf_rope_heads = Hkv
    add("self_attn.v_proj.weight", { Hkv * D, H })
    add("self_attn.o_proj.weight", { H, Hq * D })
    add("post_attention_layernorm.weight", { H }, true)   -- the pre-MLP norm, despite its name
    add("mlp.gate_proj.weight", { F, H })
    add("mlp.up_proj.weight", { F, H })
    add("mlp.down_proj.weight", { H, F })
  end
  return w
end

function R.forward(g, cfg, w, io)
  local Hq, Hkv = cfg.num_attention_heads, cfg.num_key_value_heads
  local function norm(x, weight) return g:rmsnorm(x, w(weight), { eps = cfg.rms_norm_eps }) end
  -- rope_scaling {rope_type = "llama3", factor, low_freq_factor, high_freq_factor,
  -- original_max_position_embeddings} only changes the frequency table.
  local rope = io.rope_table { theta = cfg.rope_theta, scaling = cfg.rope_scaling }

  local x = g:embed(io.ids, w "model.embed_tokens.weight")
  for i = 0, cfg.num_hidden_layers - 1 do
    local function L(name) return ("model.layers.%d.%s"):format(i, name) end

    -- attention: pre-norm, q/k/v projections, RoPE, causal GQA, output projection, residual
    local h = norm(x, L "input_layernorm.weight")
    local q = g:linear(h, w(L "self_attn.q_proj.weight")):heads(Hq)
    local k = g:linear(h, w(L "self_attn.k_proj.weight")):heads(Hkv)
    local v = g:linear(h, w(L "self_attn.v_proj.weight")):heads(Hkv)
    q, k = g:rope(q, io.pos, rope), g:rope(k, io.pos, rope)
    local a = g:attention(q, k, v, io.pos, { cache = io.kv_cache(i), scale = cfg.head_dim ^ -0.5 })
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
