/** Types of parse-prometheus-text-format (the package ships none): prom2json's shape. */
declare module "parse-prometheus-text-format" {
  interface Sample {
    readonly labels?: Record<string, string>;
    /** Counters, gauges and untyped samples. */
    readonly value?: string;
    /** Histograms and summaries. */
    readonly buckets?: Record<string, string>;
    readonly quantiles?: Record<string, string>;
    readonly count?: string;
    readonly sum?: string;
  }
  interface MetricFamily {
    readonly name: string;
    readonly help: string;
    readonly type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
    readonly metrics: readonly Sample[];
  }
  export default function parsePrometheusTextFormat(text: string): MetricFamily[];
}
