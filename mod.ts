/**
 * politely: throttle crawlers, scrapers and streaming ETL jobs as fast as a
 * site or API allows and no faster. Scrapy's throttling, backoff, rampup and
 * request scheduler, as RxJS operators and observable stores.
 *
 * The operators are in `operators/`, what they stand on in `lib/`
 * (`lib/README.md` maps it by subsystem).
 *
 * @module
 */
export * from "./lib/request.ts";
export * from "./lib/outcome.ts";
export * from "./lib/events.ts";
export * from "./lib/scope_manager_protocol.ts";
export * from "./lib/settings.ts";
export * from "./lib/scopes.ts";
export * from "./lib/scope_manager.ts";
export * from "./lib/throttler.ts";
export * from "./operators/throttle_by_scope.ts";
export * from "./lib/domain_scopes.ts";
export * from "./lib/download_errors.ts";
export * from "./lib/rate_limit_headers.ts";
export * from "./lib/response_backoff.ts";
export * from "./lib/scrapy_settings.ts";
export * from "./lib/sim/simulated_site.ts";
export * from "./operators/backoff_on.ts";
export * from "./lib/fetch_download.ts";
export * from "./lib/html_links.ts";
export * from "./operators/rampup.ts";
export * from "./lib/autothrottle_manager.ts";
export * from "./lib/fixed_window_manager.ts";
export * from "./lib/request_queue.ts";
export * from "./lib/request_fingerprint.ts";
export * from "./lib/job_dir.ts";
export * from "./lib/job_dir_lock.ts";
export * from "./lib/crawl.ts";
export * from "./lib/crawl_queue.ts";
export * from "./lib/dns_cache.ts";
export * from "./lib/robots_txt.ts";
export * from "./lib/robots_download.ts";
export * from "./lib/precise_scheduler.ts";
export * from "./lib/redis_scopes.ts";
export * from "./lib/shared_download.ts";
export * from "./lib/shared_backoff.ts";
export * from "./lib/redis_request_queue.ts";
export * from "./lib/redis_queue_status.ts";
export * from "./lib/redis_cluster.ts";
export * from "./lib/sim/simulate.ts";
export * from "./lib/sim/site_spec.ts";
export * from "./lib/dashboard/dashboard_aggregator.ts";
export * from "./lib/dashboard/serve_dashboard.ts";
