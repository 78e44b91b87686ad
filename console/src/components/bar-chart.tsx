import { formatDay, formatNumber } from "../format";

/**
 * A small bar chart of one value per day: an SVG that stretches to its box (bars only; the labels
 * are HTML, so they keep their size at any width). Each bar has a tooltip with its value, and the
 * chart has a text summary for screen readers (the page's table holds every value).
 */
export function BarChart(props: {
  days: { date: string; value: number }[];
  unit: string;
  label: string;
}) {
  const { days } = props;
  const max = Math.max(0, ...days.map((d) => d.value));
  const width = days.length * 10;
  const height = 100;
  const total = days.reduce((s, d) => s + d.value, 0);
  return (
    <figure class="chart" aria-label={props.label}>
      <div class="chart-area">
        <div class="chart-scale" aria-hidden="true">
          <span>{formatNumber(max)}</span>
          <span>0</span>
        </div>
        <svg
          viewBox={`0 0 ${width} ${height}`}
          preserveAspectRatio="none"
          role="img"
          aria-label={`${props.label}: ${formatNumber(total)} ${props.unit} over ${days.length} days, at most ${formatNumber(max)} a day`}
        >
          <line x1="0" y1={height - 0.5} x2={width} y2={height - 0.5} class="chart-axis" />
          {days.map((d, i) => {
            const h = max === 0 ? 0 : (d.value / max) * (height - 4);
            return (
              <rect
                key={d.date}
                x={i * 10 + 1.5}
                y={height - 1 - h}
                width={7}
                height={Math.max(h, d.value > 0 ? 1.5 : 0)}
                class="chart-bar"
              >
                <title>{`${d.date}: ${formatNumber(d.value)} ${props.unit}`}</title>
              </rect>
            );
          })}
        </svg>
      </div>
      {days.length > 0 && (
        <figcaption class="chart-dates" aria-hidden="true">
          <span>{formatDay(days[0]!.date)}</span>
          <span>{formatDay(days[days.length - 1]!.date)} (UTC days)</span>
        </figcaption>
      )}
    </figure>
  );
}
