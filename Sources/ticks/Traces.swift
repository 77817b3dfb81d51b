import Foundation
import Logging
import OTel
import ServiceLifecycle
import TicksServer

/// `ticks serve --otel-endpoint`: OpenTelemetry traces over OTLP/HTTP (protobuf).
///
/// Only this executable links swift-otel. It bootstraps the process's tracer
/// and W3C propagator, and its exporter runs as a service of the application's
/// group, stopped after the server so the last spans go out; TicksServer
/// itself makes spans through the Tracing API alone. Without the flag nothing
/// is bootstrapped: the library's no-op tracer stays, and the server adds no
/// spans at all (`TicksServerConfiguration.tracing`).
enum Traces {
    /// The traces URL for an OTLP/HTTP endpoint: a base such as
    /// `http://collector:4318` gets OTLP's `/v1/traces`; a URL with a path is used as it is.
    static func tracesURL(for endpoint: String) throws -> String {
        guard let url = URL(string: endpoint), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", url.host != nil
        else {
            throw TracesError.badEndpoint(endpoint)
        }
        let path = url.path
        guard path.isEmpty || path == "/" else { return endpoint }
        return (endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint) + "/v1/traces"
    }

    /// Bootstraps the tracer (service.name "ticks", service.instance.id the node's id); the returned
    /// service exports the spans and must run in the application's group. The standard OTEL_*
    /// variables still apply on top (OTEL_BSP_SCHEDULE_DELAY, OTEL_TRACES_SAMPLER, …).
    static func bootstrap(endpoint: String, nodeID: String, logger: Logger) throws -> some Service {
        var configuration = OTel.Configuration.default
        configuration.serviceName = "ticks"
        configuration.resourceAttributes = [
            "service.instance.id": nodeID,
            "service.version": BuildInfo.version,
        ]
        configuration.diagnosticLogger = .custom(logger)
        configuration.propagators = [.traceContext]
        // Traces only: logs and metrics have their own paths (stderr, /metrics).
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.traces.otlpExporter.endpoint = try tracesURL(for: endpoint)
        return try OTel.bootstrap(configuration: configuration)
    }
}

enum TracesError: Error, CustomStringConvertible {
    case badEndpoint(String)

    var description: String {
        switch self {
        case .badEndpoint(let endpoint):
            "--otel-endpoint must be an http:// or https:// URL, such as http://127.0.0.1:4318 (got '\(endpoint)')"
        }
    }
}
