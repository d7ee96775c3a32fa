-- recipes/mixtral.lua: the Mixtral sparse mixture-of-experts decoder (MixtralForCausalLM), as in
-- Mistral AI's model card and Hugging Face's modeling_mixtral.py.
-- Run it:  doppler recipes/mixtral.lua --model PATH --help
--
-- Mistral's attention layer; the MLP is replaced by a mixture of experts: a router (a bias-free
-- linear layer) scores the E experts per token, softmax over all E, the top k (2 of 8) are kept and
-- their weights renormalised to sum to 1; each chosen expert is a SwiGLU MLP
-- w2(silu(w1 x) * w3 x) and the layer's output is the weighted sum of the k expert outputs.
-- Everything runs on the GPU; only the chosen experts' weights are read.

local R = {
  name = "mixtral",
  architectures = { "MixtralForCausalLM", "mixtral" },
  chat_template = "mistral",
}

local function experts(i, which) return ("model.layers.%d.block_sparse_moe.experts.%s"):format(i, which) end

function R.weights(cfg)
  local H, F, V = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
  local D, Hq, Hkv, E = cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.num_local_experts
  local w = {
    { "model.embed_tokens.weight", { V, H } },
    { "model.norm.weight", { H }, norm = true },
  }
  if not cfg.tie_word_embeddings then w[#w + 1] = { "lm_head.weight", { V, H } } end
  for i = 0, cfg.num_hidden_layers - 1 do
    local function add(name, shape, extra)
      local e = extra or {}
      e[1], e[2] = ("model.layers.%d.%s"):format(i, name), shape
      w[#w + 1] = e
    end
    add("input_layernorm.weight", { H }, { norm = true })
    add("self_attn.q_proj.weight", { Hq * D, H })
    add("self_attn.k_proj.weight", { Hkv * D, H })
    add("self_attn.v_proj.weight", { Hkv * D, H })
    add("self_attn.o_proj.weight", { H, Hq * D })
    add("post_attention_layernorm.weight", { H }, { norm = true })   -- the pre-MoE norm
    add("block_sparse_moe.gate.weight", { E, H })                      -- the router
    -- expert e's w1 (gate), w3 (up), w2 (down), stacked on the device into [E, N, K] tensors
    for e = 0, E - 1 do
      add(("block_sparse_moe.experts.%d.w1.weight"):format(e), { F, H }, { stack = { experts(i, "w1"), e } })
      add(("block_sparse_moe.experts.%d.w3.weight"):format(e), { F, H }, { stack = { experts(i, "w3"), e } })
      add(("block_sparse_moe.experts.%d.w2.weight"):format(e), { H, F }, { stack = { experts(i, "w2"), e } })
    end
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

    -- attention: pre-norm, q/k/v projections, RoPE, causal GQA, output projection, residual
    local h = norm(x, L "input_layernorm.weight")
    local q = g:linear(h, w(L "self_attn.q_proj.weight")):heads(Hq)
    local k = g:linear(h, w(L "self_attn.k_proj.weight")):heads(Hkv)
    local v = g:linear(h, w(L "self_attn.v_proj.weight")):heads(Hkv)
    q, k = g:rope(q, io.pos, rope), g:rope(k, io.pos, rope)
    local a = g:attention(q, k, v, io.pos, {
      cache = io.kv_cache(i, window), window = window, scale = cfg.head_dim ^ -0.5,
    })
    x = x + g:linear(a:merge_heads(), w(L "self_attn.o_proj.weight"))

    -- mixture of experts: pre-norm; router logits in f32, softmax, top-k, renormalised weights;
    -- each chosen expert's SwiGLU; the weighted sum of the k outputs; residual
    h = norm(x, L "post_attention_layernorm.weight")
    local router = g:linear(h, w(L "block_sparse_moe.gate.weight"), nil, { dtype = "f32" })
    local weights, ids = g:topk_softmax(router, cfg.num_experts_per_tok)
    local m = g:silu(g:expert_linear(h, w(experts(i, "w1")), ids)) * g:expert_linear(h, w(experts(i, "w3")), ids)
    x = x + g:weighted_sum(g:expert_linear(m, w(experts(i, "w2")), ids), weights)
  end

  x = norm(io.logits_rows(x), "model.norm.weight")
  return g:linear(x, w(cfg.tie_word_embeddings and "model.embed_tokens.weight" or "lm_head.weight"))
end

return require("doppler.recipe").define(R)
