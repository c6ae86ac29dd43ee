# Plot of the gateway benchmark (bench/gateway/run.sh): median req/s and
# p99 per target and shape. gnuplot -e "datafile='…'; outfile='…'" plot.gp
set terminal pngcairo size 1200,520 font "sans,10" noenhanced
set output outfile
set datafile missing "-"
set style data histograms
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set xtics rotate by -25 scale 0
set grid ytics
set key top left
set multiplot layout 1,2 title "tollgate vs a bare httputil.ReverseProxy, nginx limit_req and HAProxy (medians of interleaved rounds)"
set title "throughput (req/s, higher is better)"
set yrange [0:*]
plot datafile using 2:xtic(1) title "-c64, 1000 tenants", '' using 3 title "-c256, 1000 tenants", '' using 4 title "denied flood (429)"
set title "p99 latency (ms, lower is better)"
set key top right
plot datafile using 5:xtic(1) title "-c64, 1000 tenants", '' using 6 title "-c256, 1000 tenants", '' using 7 title "denied flood (429)"
unset multiplot
