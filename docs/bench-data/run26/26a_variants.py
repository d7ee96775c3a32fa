#!/usr/bin/env python3
# Summarises the log written by the build of 26a_pipe_log_experiment.diff (DP_PIPE_LOG=FILE): every
# pipeline creation with its kernel, milliseconds in vkCreateComputePipelines, defines and spec
# constants. Prints the distinct variants per kernel and the creation time per kernel.
import collections, sys
lines = [l.split() for l in open(sys.argv[1])]
uniq = collections.Counter((l[1], tuple(l[3:])) for l in lines)
print("pipeline creations", len(lines), "distinct variants", len(uniq),
      "creation ms %.0f" % sum(float(l[2]) for l in lines))
per = collections.Counter(k[0] for k in uniq)
ms = collections.defaultdict(float); n = collections.Counter()
for l in lines: ms[l[1]] += float(l[2]); n[l[1]] += 1
print("kernel variants creations creation_ms")
for k, v in per.most_common(): print(k, v, n[k], "%.0f" % ms[k])
