import Tracing

/// The W3C trace context of a span (`traceparent`, and `tracestate` when the
/// trace has one), as text that can travel where HTTP headers cannot: an
/// event bus entry, so the node that hands the event to its sockets makes its
/// span a child of the span that published it.
///
/// Which headers, and their format, is the bootstrapped instrument's business
/// (`ticks serve --otel-endpoint` sets OpenTelemetry's W3C propagator); with
/// no instrument nothing is injected and `current()` is nil.
struct TraceContext: Sendable, Equatable {
    var traceparent: String
    var tracestate: String?

    /// The current task's trace context, if it is inside a span of a real tracer.
    static func current() -> TraceContext? {
        // No context at all (nothing traced this task): not even a look at the instrument.
        guard let context = ServiceContext.current else { return nil }
        var headers = Headers()
        InstrumentationSystem.instrument.inject(context, into: &headers, using: HeadersInjector())
        return headers.traceparent.map { TraceContext(traceparent: $0, tracestate: headers.tracestate) }
    }

    /// A context whose span is the remote parent this trace context names.
    var serviceContext: ServiceContext {
        var context = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(
            Headers(traceparent: traceparent, tracestate: tracestate), into: &context, using: HeadersExtractor())
        return context
    }

    /// The two headers of W3C Trace Context; other keys a propagator may write are not carried.
    struct Headers: Sendable {
        var traceparent: String?
        var tracestate: String?
    }

    struct HeadersInjector: Injector {
        func inject(_ value: String, forKey key: String, into carrier: inout Headers) {
            switch key.lowercased() {
            case "traceparent": carrier.traceparent = value
            case "tracestate": carrier.tracestate = value
            default: break
            }
        }
    }

    struct HeadersExtractor: Extractor {
        func extract(key: String, from carrier: Headers) -> String? {
            switch key.lowercased() {
            case "traceparent": carrier.traceparent
            case "tracestate": carrier.tracestate
            default: nil
            }
        }
    }
}
