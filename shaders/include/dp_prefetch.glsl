// shaders/include/dp_prefetch.glsl: the side prefetcher's control words (gpu/prefetch.c), shared by
// loop/prefetch.comp and loop/prefetch_signal.comp. u32 indices: progress copies at k * CTL_STRIDE
// (k < 64), the current run's base, the host's quit flag, the side kernel's sink, and its counts of the stages
// it reached, of those the main queue had finished by then (late), and of those it skipped (prefetch.comp).
#ifndef DP_PREFETCH_GLSL
#define DP_PREFETCH_GLSL

const uint CTL_STRIDE = 64u;     // 256 bytes between two copies of the progress count
const uint CTL_BASE = 4096u;
const uint CTL_QUIT = 4160u;
const uint CTL_SINK = 4224u;
const uint CTL_SEEN = 4288u;
const uint CTL_LATE = 4352u;
const uint CTL_SKIPPED = 4416u;

layout(buffer_reference, std430, buffer_reference_align = 4) coherent volatile buffer PrefetchCtl { uint v[]; };

#endif
