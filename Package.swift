// swift-tools-version:6.2
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny")
]

let package = Package(
    name: "ticks",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .executable(name: "ticks", targets: ["ticks"]),
        .library(name: "TicksProtocol", targets: ["TicksProtocol"]),
        .library(name: "TicksReceipts", targets: ["TicksReceipts"]),
        .library(name: "TicksServer", targets: ["TicksServer"]),
        .library(name: "TicksClient", targets: ["TicksClient"]),
        .executable(name: "ticks-chat", targets: ["ticks-chat"]),
        .executable(name: "ticks-bench", targets: ["ticks-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-websocket.git", from: "2.8.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        // Spans in TicksServer go through the Tracing API only; without a bootstrapped tracer they are no-ops.
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // The OTLP/HTTP exporter behind `ticks serve --otel-endpoint`; only the `ticks` executable links it.
        // The gRPC exporter is left out (trait OTLPGRPC): it would build grpc-swift for nothing.
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0", traits: ["OTLPHTTP"]),
        // DocC for TicksClient (`scripts/docs`): a command plugin only, no target depends on it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
    ],
    targets: [
        // Wire types shared by server and SDK: Foundation only.
        .target(name: "TicksProtocol", swiftSettings: swiftSettings),
        // The pure receipt rules (cursors, unread counts, who read what): no I/O.
        .target(name: "TicksReceipts", swiftSettings: swiftSettings),
        .target(
            name: "TicksServer",
            dependencies: [
                "TicksProtocol",
                "TicksReceipts",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdWebSocket", package: "hummingbird-websocket"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            // The web demo's HTML, CSS and JavaScript, served by `ticks serve --demo`.
            resources: [.copy("Demo/Assets"), .copy("OpenAPI/openapi.json")],
            swiftSettings: swiftSettings
        ),
        // The Swift SDK: durable outbox, live state, automatic delivered, the read indicator.
        .target(
            name: "TicksClient",
            dependencies: [
                "TicksProtocol",
                "TicksReceipts",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "ticks-chat",
            dependencies: [
                "TicksClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        // The load generator: drives a running Ticks (or Synapse) over real HTTP and WebSocket.
        .executableTarget(
            name: "ticks-bench",
            dependencies: [
                "TicksProtocol",
                "TicksClient",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "ticks",
            dependencies: [
                "TicksServer",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // `ticks status` asks a running server.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                // `ticks serve --otel-endpoint`: exports the server's spans over OTLP/HTTP.
                .product(name: "OTel", package: "swift-otel"),
            ],
            swiftSettings: swiftSettings
        ),
        // What the server's and the SDK's tests share: a clock they advance instead of sleeping.
        .target(
            name: "TicksTestSupport",
            dependencies: ["TicksProtocol"],
            path: "Tests/TicksTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TicksProtocolTests",
            dependencies: ["TicksProtocol", .product(name: "PropertyBased", package: "swift-property-based")],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TicksReceiptsTests",
            dependencies: ["TicksReceipts"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TicksServerTests",
            dependencies: [
                "TicksServer",
                "TicksTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "PropertyBased", package: "swift-property-based"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "HummingbirdWSClient", package: "hummingbird-websocket"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TicksClientTests",
            dependencies: [
                "TicksClient",
                "TicksServer",
                "TicksTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
