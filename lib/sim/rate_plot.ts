/**
 * A plot of a site's admitted rate over time against its hidden limit, as
 * SVG: written by the adaptive-limits benchmark (docs/figures/adaptive.svg)
 * and by `politely simulate --svg`.
 *
 * @module
 */

/** One panel of {@linkcode ratePlotSvg}: a site. */
export interface RatePanel {
  readonly title: string;
  /** When each admitted request arrived, ms, in order. */
  readonly admittedAt: ArrayLike<number>;
  /** When the site's last request arrived (admitted or not), ms. */
  readonly endAt: number;
  /** The site's hidden limit, requests/s (drawn dashed; 0 for none). */
  readonly limit: number;
}

/**
 * A step plot of admitted requests per 1 s bin against the hidden limit
 * (dashed), one panel per site, as a standalone SVG document.
 *
 * @param panels The sites.
 * @param legend What the blue line is.
 * @returns The SVG text.
 */
export function ratePlotSvg(panels: readonly RatePanel[], legend: string): string {
  const W = 360;
  const H = 230;
  const m = { l: 44, r: 12, t: 30, b: 36 };
  const parts: string[] = [];
  panels.forEach((p, k) => {
    const ox = k * W;
    const t0 = p.admittedAt.length > 0 ? p.admittedAt[0]! : 0;
    const bins: number[] = [];
    for (let k = 0; k < p.admittedAt.length; k++) {
      const i = Math.floor((p.admittedAt[k]! - t0) / 1000);
      while (bins.length <= i) bins.push(0);
      bins[i]! += 1;
    }
    // The last bin is cut short by the crawl's end; a partial second would read as a slowdown.
    const last = Math.max(t0, p.endAt);
    if (bins.length > 1 && (last - t0) % 1000 < 999) bins.pop();
    const seconds = Math.max(1, bins.length);
    let yMax = Math.max(1, p.limit * 1.3);
    for (const b of bins) if (b > yMax) yMax = b;
    yMax *= 1.05;
    const x = (s: number) => ox + m.l + (s / seconds) * (W - m.l - m.r);
    const y = (v: number) => m.t + (1 - v / yMax) * (H - m.t - m.b);
    const steps = bins.map((v, i) =>
      `${x(i).toFixed(1)},${y(v).toFixed(1)} ${x(i + 1).toFixed(1)},${y(v).toFixed(1)}`
    );
    const yTicks = niceTicks(yMax);
    const xTicks = niceTicks(seconds);
    parts.push(
      `<text x="${ox + m.l}" y="18" font-size="12" font-weight="bold">${escapeXml(p.title)}</text>`,
      `<line x1="${x(0)}" y1="${y(0)}" x2="${x(seconds)}" y2="${y(0)}" stroke="#444"/>`,
      `<line x1="${x(0)}" y1="${y(0)}" x2="${x(0)}" y2="${y(yMax)}" stroke="#444"/>`,
      ...yTicks.map((v) =>
        `<text x="${x(0) - 4}" y="${
          (y(v) + 4).toFixed(1)
        }" font-size="10" text-anchor="end">${v}</text>` +
        `<line x1="${x(0)}" y1="${y(v).toFixed(1)}" x2="${x(seconds)}" y2="${
          y(v).toFixed(1)
        }" stroke="#eee"/>`
      ),
      ...xTicks.map((s) =>
        `<text x="${x(s).toFixed(1)}" y="${
          y(0) + 14
        }" font-size="10" text-anchor="middle">${s}</text>`
      ),
      `<text x="${(x(0) + x(seconds)) / 2}" y="${
        H - 4
      }" font-size="10" text-anchor="middle">seconds since the first request</text>`,
      `<line x1="${x(0)}" y1="${y(p.limit).toFixed(1)}" x2="${x(seconds)}" y2="${
        y(p.limit).toFixed(1)
      }" stroke="#c0392b" stroke-width="1.5" stroke-dasharray="6 4"/>`,
      `<text x="${ox + 12}" y="${
        (y(0) + y(yMax)) / 2
      }" font-size="10" text-anchor="middle" transform="rotate(-90 ${ox + 12} ${
        (y(0) + y(yMax)) / 2
      })">admitted per second</text>`,
      `<polyline fill="none" stroke="#2c6fbb" stroke-width="1.8" points="${steps.join(" ")}"/>`,
    );
  });
  const legendY = H + 14;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W * panels.length}" height="${
      H + 22
    }" viewBox="0 0 ${W * panels.length} ${H + 22}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    ...parts,
    `<line x1="${44}" y1="${legendY - 4}" x2="${70}" y2="${
      legendY - 4
    }" stroke="#2c6fbb" stroke-width="1.8"/>`,
    `<text x="74" y="${legendY}" font-size="10">${escapeXml(legend)}</text>`,
    `<line x1="${W + 100}" y1="${legendY - 4}" x2="${W + 126}" y2="${
      legendY - 4
    }" stroke="#c0392b" stroke-width="1.5" stroke-dasharray="6 4"/>`,
    `<text x="${W + 130}" y="${legendY}" font-size="10">the site's hidden limit</text>`,
    `</svg>`,
    "",
  ].join("\n");
}

function niceTicks(max: number): number[] {
  const raw = max / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((f) => f * mag).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let v = 0; v <= max + 1e-9; v += step) out.push(Math.round(v * 1000) / 1000);
  return out;
}

function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
