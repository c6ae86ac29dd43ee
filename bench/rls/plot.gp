# Plot of the rate limit service benchmark (bench/rls/run.sh): median
# decisions/s and p99 per server and number of callers.
# gnuplot -e "datafile='…'; outfile='…'" plot.gp
set terminal pngcairo size 1200,480 font "sans,10" noenhanced
set output outfile
set datafile missing "-"
set style data histograms
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key top left
set xlabel "concurrent callers (4 gRPC connections)"
set multiplot layout 1,2 title "Envoy rate limit service: tollgate vs envoyproxy/ratelimit, a no-op gRPC stub as the ceiling (medians of interleaved rounds)"
set title "throughput (decisions/s, higher is better)"
set yrange [0:*]
plot datafile using 2:xtic(1) title "no-op stub", '' using 3 title "envoyproxy/ratelimit", '' using 4 title "tollgate"
set title "p99 latency (ms, lower is better)"
set key top left
set logscale y
set yrange [*:*]
plot datafile using 5:xtic(1) title "no-op stub", '' using 6 title "envoyproxy/ratelimit", '' using 7 title "tollgate"
unset multiplot
