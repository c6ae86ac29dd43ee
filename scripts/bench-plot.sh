#!/usr/bin/env bash
# Draws decisions/s against concurrent callers, one line per limiter,
# from the data file scripts/bench.sh writes (bench/out/redis.dat: a
# header of names, then goroutines and each limiter's median decisions/s).
# Given the network lanes' data instead (bench/out/network.dat: a header
# "rtt_ms g=1 g=64 ...", then each lane's measured round trip and
# tollgate fixed window ÷ the faster peer per goroutine count; NaN where
# it is not known), it draws that ratio against the round trip, one line
# per goroutine count.
# Installs gnuplot from Debian when missing.
#
#   scripts/bench-plot.sh bench/out/redis.dat docs/bench-redis.png
#   scripts/bench-plot.sh bench/out/network.dat docs/bench-network.png
set -euo pipefail
DAT=${1:-bench/out/redis.dat} PNG=${2:-docs/bench-redis.png}
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "bench-plot: installing gnuplot-nox" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null
fi
mkdir -p "$(dirname "$PNG")"
cols=$(head -1 "$DAT" | wc -w)
if [ "$(head -1 "$DAT" | awk '{print $1}')" = rtt_ms ]; then
  gnuplot <<GP
set terminal pngcairo size 900,560 font "sans,10"
set output "$PNG"
set title "tollgate fixed window ÷ the faster Redis peer, against the Redis round trip (1000 tenants)"
set xlabel "Redis round trip, measured (ms, log scale)"
set ylabel "decisions/s ÷ the faster peer's"
set logscale x 10
set xrange [0.01:5]
set xtics ("0.01" 0.01, "0.03" 0.03, "0.1" 0.1, "0.2" 0.2, "0.6" 0.6, "1" 1, "2" 2, "5" 5)
set yrange [0:*]
set datafile missing "NaN"
set key outside right top
set termoption noenhanced
set grid
set arrow from 0.01,1 to 5,1 nohead dt 2 lc rgb "#999999"
plot for [i=2:$cols] "$DAT" using 1:i with linespoints lw 2 pt 7 title columnheader(i)
GP
  exit 0
fi
# dash types: solid for tollgate's columns, dashed for the peers'
dashes=$(head -1 "$DAT" | awk '{for (i = 2; i <= NF; i++) printf "%s ", ($i ~ /^tollgate/ ? 1 : 2)}')
gnuplot <<GP
set terminal pngcairo size 900,560 font "sans,10"
set output "$PNG"
set title "Redis decisions/s against concurrent callers (1000 tenants, one local redis-server)"
set xlabel "concurrent callers (goroutines)"
set ylabel "decisions/s"
set logscale x 2
set xrange [0.8:700]
set xtics ("1" 1, "64" 64, "512" 512)
# Distinct colours (sixteen, cycling past them); tollgate's lines solid, the peers' dashed.
dashes = "$dashes"
colors = "#1b9e77 #d95f02 #7570b3 #e7298a #66a61e #e6ab02 #a6761d #000000 #e41a1c #377eb8 #999999 #4daf4a #984ea3 #ff7f00 #a65628 #f781bf"
set format y "%.0s%c"
set key outside right top
set termoption noenhanced
set grid ytics
plot for [i=2:$cols] "$DAT" using 1:i with linespoints lw 2 pt 7 lc rgb word(colors, (i-2)%16+1) dt int(word(dashes, i-1)) title columnheader(i)
GP
