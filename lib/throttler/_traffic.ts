/**
 * The counting behind `Throttler.meterTraffic`: per-scope counts kept on the
 * scope entries and listed when touched, and totals over all scopes. The gate
 * (`_gate.ts`) counts each send and completion while a meter is open; a
 * closed meter costs one comparison per request.
 *
 * @module
 */
import type { TrafficMeter, TrafficTake, TrafficTotals } from "./traffic_meter.ts";

/** One scope's requests since a meter's last `take` (see `Throttler.meterTraffic`). */
export interface TrafficCount {
  readonly scope: string;
  sent: number;
  done: number;
  failed: number;
  /** In the list the next `take` reads. */
  listed: boolean;
}

/** The traffic counts of one throttler, shared by its open meters. */
export class TrafficCounter {
  /** Open meters; count nothing while 0. Written only here. */
  meters = 0;
  /** Requests in all since the last `takeTotals` of a meter; the gate increments it. */
  totals: { sent: number; done: number; failed: number } = { sent: 0, done: 0, failed: 0 };
  /** Counts with requests since the last `take` of a meter. */
  #touched: TrafficCount[] = [];

  /** The open count of a scope, listed for the next `take`. */
  count(scope: string, entry: { traffic: TrafficCount | undefined }): TrafficCount {
    // (An entry back from the pool has none: it is reset when evicted.)
    const t = entry.traffic ??= { scope, sent: 0, done: 0, failed: 0, listed: false };
    if (!t.listed) {
      t.listed = true;
      this.#touched.push(t);
    }
    return t;
  }

  /** Open a meter (see `Throttler.meterTraffic`). */
  open(): TrafficMeter {
    this.meters++;
    let open = true;
    return {
      take: () => {
        const counts = this.#touched;
        this.#touched = [];
        const out: TrafficTake[] = [];
        for (const t of counts) {
          t.listed = false;
          if (t.sent > 0 || t.done > 0) {
            out.push({ scope: t.scope, sent: t.sent, done: t.done, failed: t.failed });
          }
          t.sent = 0;
          t.done = 0;
          t.failed = 0;
        }
        return out;
      },
      takeTotals: (): TrafficTotals => {
        const totals = this.totals;
        this.totals = { sent: 0, done: 0, failed: 0 };
        return totals;
      },
      close: () => {
        if (!open) return;
        open = false;
        if (--this.meters === 0) {
          for (const t of this.#touched) t.listed = false;
          this.#touched = [];
          this.totals = { sent: 0, done: 0, failed: 0 };
        }
      },
    };
  }
}
