#!/bin/bash
# Run 50d (session 43): the split of gpu/device.c (capabilities into gpu/device_caps.c) on the lent GPU: the
# capabilities `doppler devices --json` prints by the binary before the split (.abX/doppler_before.xz, 94df3e9's
# sources) and after (.abX/doppler_after.xz, unpacked to build-h100/doppler; both xz-compressed so that the tree
# and the two binaries fit the 64 MiB a call carries)
# which must be the same, then the tests of what branches on them: the side queue's
# family (test_side_prefetch, test_gpu_loop), the cooperative-matrix shape (test_gemm_cm), int64 atomics and
# int8 dot products (test_glu_down, test_gemv_q8).
# On the lent GPU machine: bash docs/bench-data/run50/50d_device_caps.sh
unpack() { python3 -c "import lzma, sys; open(sys.argv[2], 'wb').write(lzma.open(sys.argv[1]).read())" "$1" "$2"; chmod +x "$2"; }
mkdir -p build-h100 && unpack .abX/doppler_after.xz build-h100/doppler && unpack .abX/doppler_before.xz /tmp/doppler_before
. scripts/device/env.sh
T0=$(date +%s)
S=$OUT/50d_summary.txt
/tmp/doppler_before devices --json > $OUT/50d_devices_before.json 2>&1
$B devices --json > $OUT/50d_devices_after.json 2>&1
if cmp -s $OUT/50d_devices_before.json $OUT/50d_devices_after.json; then echo "devices --json: the same" >> $S
else echo "devices --json: DIFFER" >> $S; diff $OUT/50d_devices_before.json $OUT/50d_devices_after.json >> $S; fi
mkdir -p $OUT/50d_tests
for t in side_prefetch gpu_loop gemm_cm glu_down gemv_q8; do
  [ $(( $(date +%s) - T0 )) -gt 240 ] && { echo "test_$t not run (time)" >> $S; continue; }
  timeout 120 $B tests/lua/test_$t.lua > $OUT/50d_tests/test_$t.txt 2>&1
  echo "test_$t rc $?: $(tail -1 $OUT/50d_tests/test_$t.txt)" >> $S
done
echo "total $(( $(date +%s) - T0 )) s" >> $S
cat $S
