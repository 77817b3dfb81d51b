import ArgumentParser
import Foundation
import Logging
import NIOCore
import TicksClient
import TicksProtocol

/// What the Swift SDK costs an app: opening with every channel from the
/// device cache while offline, and catching up (`POST /sync`) after events
/// missed while away. Drives the real `TicksClient` against a running server.
struct SDKCache: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sdk-cache",
        abstract: "The SDK's cost: open N cached channels offline; catch up after M missed events (POST /sync).",
        discussion: """
            Seeds a reader who is a member of --channels channels (each with two of --senders senders and \
            --seed-messages messages), then drives the real TicksClient.

            open: a new ChatClient on a copy of the warmed cache connects to an address nothing listens on; \
            the time until channels().load() shows every channel (--open-runs times).

            sync: per run, a fresh cache warmed by paging the channel list; while the reader is away the senders \
            post --missed-events messages over --affected-channels channels; a new ChatClient on that cache \
            connects to the server: the time until every affected channel's newest message is in the client, \
            and what it asked of the server (POST /sync calls, channel reloads), from the server's /metrics.
            """)

    @OptionGroup var server: ServerOptions
    @Option(help: "Channels the reader is a member of (all cached).") var channels = 1000
    @Option(help: "Senders; each channel has two of them and the reader.") var senders = 10
    @Option(help: "Messages each channel starts with.") var seedMessages = 2
    @Option(help: "Events made while the reader is away, per sync run: messages from the senders.")
    var missedEvents = 10000
    @Option(help: "Channels the missed events are spread over, evenly (a different set each run).")
    var affectedChannels = 100
    @Option(help: "Sync runs; each on a freshly warmed cache with new missed events.") var runs = 5
    @Option(help: "Offline opens measured.") var openRuns = 20
    @Option(help: "Channels per list page while warming (the SDK's channelListPageSize, at most 30).")
    var pageSize = 30
    @Option(help: "Milliseconds between looks at the affected channels while syncing.") var probeInterval = 10
    @Option(help: "open, sync, or open,sync.") var only = "open,sync"
    @Option(help: "Where the offline client connects (default: a free loopback port, nothing listening).")
    var offlineURL: String?
    @Option(help: "Seconds between one run's last change and the next warm-up (more than the SDK's 5 s sync overlap).")
    var gap = 7.0
    @Option(help: "Keep the cache files in this folder (default: a temporary folder, removed at the end).")
    var workDir: String?
    @Option(help: "A perf control FIFO (perf record --control fifo:PATH -D -1): events on only while measuring.")
    var perfControl: String?
    @Option(help: "HTTP connections for seeding and the missed events.") var connections = 16
    @Option(help: "The SDK's log level (its logs go to stderr).") var clientLogLevel = "error"
    @Flag(help: "The syncing client does not mark messages delivered (ChatClientConfiguration.marksDelivered).")
    var noMarksDelivered = false

    // MARK: Results

    /// Nearest-rank percentiles of a handful of runs, in milliseconds.
    struct Stats: Codable {
        var runs: Int
        var median: Double
        var p90: Double
        var p95: Double
        var min: Double
        var max: Double
        var mean: Double

        init(_ values: [Double]) {
            let sorted = values.sorted()
            runs = sorted.count
            func rank(_ p: Double) -> Double {
                guard !sorted.isEmpty else { return 0 }
                return sorted[
                    Swift.max(0, Swift.min(sorted.count - 1, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1))]
            }
            let middle = sorted.count / 2
            median =
                sorted.isEmpty ? 0 : sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
            p90 = rank(90)
            p95 = rank(95)
            min = sorted.first ?? 0
            max = sorted.last ?? 0
            mean = sorted.isEmpty ? 0 : sorted.reduce(0, +) / Double(sorted.count)
            median = round1(median)
            mean = round1(mean)
        }

        var text: String {
            "median \(median) ms, p90 \(p90), p95 \(p95), min \(min), max \(max) (\(runs) runs; nearest rank)"
        }
    }

    struct OpenRun: Codable {
        /// From creating the ChatClient to `channels().state` showing every channel.
        var total_ms: Double
        /// `ChatClient(configuration:)`: opening the SQLite file.
        var init_ms: Double
        /// `connect(userID:token:)`: the outbox and the cache's channel heads read, the socket refused.
        var connect_ms: Double
        /// `channels()` and `load()`: the list from the cached channels (the server's page fails).
        var load_ms: Double
        var channels_shown: Int
        var client_cpu_ms: Double
        /// The same open with an empty cache file just before: what does not depend on the cache.
        var empty_total_ms: Double
        var empty_connect_ms: Double
    }

    struct SyncRun: Codable {
        /// From creating the ChatClient to every affected channel's newest message being in it.
        var caught_up_ms: Double
        /// Creating the ChatClient and `connect` returning (connected: the first health.check).
        var connected_ms: Double
        var missed_events: Int
        var affected_channels: Int
        /// Affected channels whose newest message never arrived (within the timeout).
        var missing: Int
        /// Affected channels the client shows as synced (`ChatChannel.isSynced`) once caught up and settled.
        var synced_channels: Int
        /// Requests the server answered while the client caught up and settled, from its /metrics.
        var sync_calls: Int
        var channel_queries: Int
        var channel_list_queries: Int
        var delivered_calls: Int
        var socket_receipts: Int
        /// Server time spent answering POST /sync (its request-duration histogram's sum).
        var server_sync_ms: Double
        /// Server CPU while the client caught up (to caught_up_ms).
        var server_cpu_ms: Double
        /// This process's CPU (the SDK, its HTTP client and socket, the probe) to caught_up_ms.
        var client_cpu_ms: Double
        /// Time spent inside the probe's `state` reads (snapshots of the affected channels).
        var probe_ms: Double
        var probes: Int
        /// Making the missed events (not measured in caught_up_ms).
        var make_events_ms: Double
        /// The warm-up before this run: a fresh cache, the channel list paged through.
        var warm_ms: Double
        var warm_pages: Int
        var cache_file_bytes: Int
    }

    struct Result: Codable {
        var scenario = "sdk-cache"
        var params: [String: String]
        var seed_ms: Double
        var cache_file_bytes: Int
        var warm_ms: Double
        var warm_pages: Int
        var open_runs: [OpenRun]
        var open_total_ms: Stats?
        var open_init_ms: Stats?
        var open_connect_ms: Stats?
        var open_load_ms: Stats?
        var open_empty_total_ms: Stats?
        var sync_runs: [SyncRun]
        var sync_caught_up_ms: Stats?
        var sync_connected_ms: Stats?
        var sync_calls: Stats?
        var sync_client_cpu_ms: Stats?
        var sync_server_cpu_ms: Stats?
    }

    // MARK: Running

    func run() async throws {
        let parts = Set(only.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) })
        guard !parts.isEmpty, parts.isSubset(of: ["open", "sync"]) else { throw ValidationError("--only: open, sync") }
        guard channels >= 1, senders >= 2, seedMessages >= 1, (1...30).contains(pageSize) else {
            throw ValidationError("--channels ≥ 1, --senders ≥ 2, --seed-messages ≥ 1, --page-size 1–30")
        }
        guard affectedChannels >= 1, affectedChannels <= channels, missedEvents >= affectedChannels else {
            throw ValidationError("--affected-channels between 1 and --channels, at most --missed-events")
        }
        let ticks = try await server.ticks(connections: connections)
        let folder: URL
        let temporary = workDir == nil
        if let workDir {
            folder = URL(fileURLWithPath: workDir)
        } else {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent("ticks-sdk-cache-\(runPrefix())")
        }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let perf = try perfControl.map(PerfControl.init(path:))
        do {
            let result = try await measure(ticks, folder: folder, parts: parts, perf: perf)
            await ticks.http.shutdown()
            if temporary { try? FileManager.default.removeItem(at: folder) }
            try report(Self.describe(result), json: result, asJSON: server.json)
        } catch {
            await ticks.http.shutdown()
            if temporary { try? FileManager.default.removeItem(at: folder) }
            throw error
        }
    }

    private func measure(_ ticks: TicksTarget, folder: URL, parts: Set<String>, perf: PerfControl?) async throws
        -> Result
    {
        let prefix = runPrefix()
        let world = World(prefix: prefix, channels: channels, senders: senders)
        let seedStart = ContinuousClock.now
        try await seed(world, ticks)
        let seedMS = ms(ContinuousClock.now - seedStart)
        progress("seeded \(channels) channels in \(Int(seedMS)) ms (reader \(world.reader))")

        let readerToken = try await ticks.tokens.user(world.reader)
        let warmed = folder.appendingPathComponent("warm.sqlite")
        let warm = try await self.warm(world, ticks, token: readerToken, file: warmed)
        let cacheBytes = fileBytes(warmed)
        progress("warmed: \(warm.pages) pages, \(Int(warm.ms)) ms, cache \(cacheBytes) bytes")

        var opens: [OpenRun] = []
        if parts.contains("open") {
            let offline = try offlineURL ?? "http://127.0.0.1:\(freePort())"
            for run in 0..<openRuns {
                let copy = folder.appendingPathComponent("open-\(run).sqlite")
                try copyDatabase(warmed, to: copy)
                let result = try await openOffline(
                    world, ticks, token: readerToken, file: copy, url: offline, perf: perf)
                opens.append(result)
                removeDatabase(copy)
                progress("open \(run + 1)/\(openRuns): \(result.total_ms) ms (\(result.channels_shown) channels)")
            }
        }

        var syncs: [SyncRun] = []
        if parts.contains("sync") {
            for run in 0..<runs {
                // The previous run's changes fall outside the next sync's overlap.
                try await Task.sleep(for: .seconds(gap))
                let file = folder.appendingPathComponent("sync-\(run).sqlite")
                let warmRun = try await self.warm(world, ticks, token: readerToken, file: file)
                let result = try await syncRun(
                    run, world, ticks, token: readerToken, file: file, warm: warmRun, perf: perf)
                syncs.append(result)
                removeDatabase(file)
                progress(
                    "sync \(run + 1)/\(runs): caught up in \(result.caught_up_ms) ms, \(result.sync_calls) POST /sync,"
                        + " \(result.channel_queries) channel queries, missing \(result.missing)")
            }
        }
        // With --work-dir the warmed cache stays, to look into.
        if workDir == nil { removeDatabase(warmed) }

        let params: [String: String] = [
            "channels": "\(channels)", "senders": "\(senders)", "seed_messages": "\(seedMessages)",
            "missed_events": "\(missedEvents)", "affected_channels": "\(affectedChannels)", "runs": "\(runs)",
            "open_runs": "\(openRuns)", "page_size": "\(pageSize)", "probe_interval_ms": "\(probeInterval)",
            "only": only, "marks_delivered": "\(!noMarksDelivered)",
        ]
        return Result(
            params: params, seed_ms: seedMS, cache_file_bytes: cacheBytes, warm_ms: warm.ms, warm_pages: warm.pages,
            open_runs: opens,
            open_total_ms: opens.isEmpty ? nil : Stats(opens.map(\.total_ms)),
            open_init_ms: opens.isEmpty ? nil : Stats(opens.map(\.init_ms)),
            open_connect_ms: opens.isEmpty ? nil : Stats(opens.map(\.connect_ms)),
            open_load_ms: opens.isEmpty ? nil : Stats(opens.map(\.load_ms)),
            open_empty_total_ms: opens.isEmpty ? nil : Stats(opens.map(\.empty_total_ms)),
            sync_runs: syncs,
            sync_caught_up_ms: syncs.isEmpty ? nil : Stats(syncs.map(\.caught_up_ms)),
            sync_connected_ms: syncs.isEmpty ? nil : Stats(syncs.map(\.connected_ms)),
            sync_calls: syncs.isEmpty ? nil : Stats(syncs.map { Double($0.sync_calls) }),
            sync_client_cpu_ms: syncs.isEmpty ? nil : Stats(syncs.map(\.client_cpu_ms)),
            sync_server_cpu_ms: syncs.isEmpty ? nil : Stats(syncs.map(\.server_cpu_ms)))
    }

    /// The users and channels of one invocation.
    struct World: Sendable {
        let prefix: String
        let reader: String
        let senders: [String]
        let cids: [ChannelID]

        init(prefix: String, channels: Int, senders: Int) {
            self.prefix = prefix
            reader = "\(prefix)-bench-reader"
            self.senders = (0..<senders).map { "\(prefix)-sender\($0)" }
            cids = (0..<channels).map { ChannelID(type: "messaging", id: "\(prefix)-c\($0)") }
        }

        /// Channel `index`'s two senders.
        func senders(of index: Int) -> (String, String) {
            (senders[index % senders.count], senders[(index + 1) % senders.count])
        }
    }

    /// The reader, the senders, the channels with their first messages, all
    /// of them marked delivered by the reader (so warming the cache marks nothing).
    private func seed(_ world: World, _ ticks: TicksTarget) async throws {
        try await ticks.upsertUsers([world.reader] + world.senders)
        var senderTokens: [String: String] = [:]
        for sender in world.senders { senderTokens[sender] = try await ticks.tokens.user(sender) }
        let tokens = senderTokens
        let seedMessages = self.seedMessages
        let newest = Locked<[Int: String]>([:])
        try await forEachConcurrently(Array(world.cids.enumerated()), width: 16) { pair in
            let (index, cid) = pair
            let (first, second) = world.senders(of: index)
            try await ticks.admin(
                .POST, "/channels/\(cid.type)/\(cid.id)/query",
                "{\"data\": {\"members\": [\"\(world.reader)\", \"\(first)\", \"\(second)\"], \"created_by\": {\"id\": \"\(first)\"}}}"
            )
            for number in 0..<seedMessages {
                let sender = number % 2 == 0 ? first : second
                let id = "\(cid.id)-s\(number)"
                try await ticks.http.call(
                    .POST, ticks.url("/channels/\(cid.type)/\(cid.id)/message"),
                    headers: ticks.headers(tokens[sender]!),
                    json: "{\"message\": {\"id\": \"\(id)\", \"text\": \"hello \(number) from \(sender)\"}}")
                if number == seedMessages - 1 { newest.withLock { $0[index] = id } }
            }
        }
        let readerToken = try await ticks.tokens.user(world.reader)
        let last = newest.withLock { $0 }
        for batch in stride(from: 0, to: world.cids.count, by: 100) {
            let entries = (batch..<min(batch + 100, world.cids.count)).map { index in
                "{\"cid\": \"\(world.cids[index].rawValue)\", \"id\": \"\(last[index]!)\"}"
            }
            try await ticks.http.call(
                .POST, ticks.url("/channels/delivered"), headers: ticks.headers(readerToken),
                json: "{\"latest_delivered_messages\": [\(entries.joined(separator: ","))]}")
        }
    }

    private func clientConfiguration(_ url: String, _ ticks: TicksTarget, file: URL) throws -> ChatClientConfiguration {
        guard let base = URL(string: url) else { throw ValidationError("not a URL: \(url)") }
        var configuration = ChatClientConfiguration(baseURL: base, apiKey: ticks.apiKey, outbox: .file(file))
        configuration.channelListPageSize = pageSize
        var logger = Logger(label: "ticks.client.bench")
        logger.logLevel = Logger.Level(rawValue: clientLogLevel) ?? .error
        configuration.logger = logger
        return configuration
    }

    /// A fresh cache: connect, page through the whole channel list, write it, disconnect.
    private func warm(_ world: World, _ ticks: TicksTarget, token: String, file: URL) async throws
        -> (ms: Double, pages: Int)
    {
        removeDatabase(file)
        let start = ContinuousClock.now
        let client = try ChatClient(configuration: try clientConfiguration(ticks.baseURL, ticks, file: file))
        try await client.connect(userID: world.reader, token: token)
        guard await client.connectionStatus.isConnected else {
            throw ValidationError("the reader could not connect to \(ticks.baseURL)")
        }
        let list = await client.channels()
        try await list.load()
        var pages = 1
        while await list.state.hasMore {
            try await list.loadMore()
            pages += 1
        }
        let shown = await list.state.channels.count
        await client.flushCache()
        let elapsed = ms(ContinuousClock.now - start)
        await client.disconnect()
        guard shown == world.cids.count else {
            throw ValidationError("warming showed \(shown) channels, not \(world.cids.count)")
        }
        return (elapsed, pages)
    }

    /// One offline open: a new client on the cache, a server that refuses, the list from the cache;
    /// just before it, the same with an empty cache file (the part that does not depend on the cache).
    private func openOffline(
        _ world: World, _ ticks: TicksTarget, token: String, file: URL, url: String, perf: PerfControl?
    ) async throws -> OpenRun {
        let empty = URL(fileURLWithPath: file.path + "-empty.sqlite")
        removeDatabase(empty)
        let baseline = try await openOnce(world, ticks, token: token, file: empty, url: url, expected: 0, perf: nil)
        removeDatabase(empty)
        var run = try await openOnce(
            world, ticks, token: token, file: file, url: url, expected: world.cids.count, perf: perf)
        run.empty_total_ms = baseline.total_ms
        run.empty_connect_ms = baseline.connect_ms
        return run
    }

    private func openOnce(
        _ world: World, _ ticks: TicksTarget, token: String, file: URL, url: String, expected: Int, perf: PerfControl?
    ) async throws -> OpenRun {
        let configuration = try clientConfiguration(url, ticks, file: file)
        perf?.enable()
        let cpu0 = processCPUSeconds()
        let start = ContinuousClock.now
        let client = try ChatClient(configuration: configuration)
        let made = ContinuousClock.now
        try await client.connect(userID: world.reader, token: token)
        let connected = ContinuousClock.now
        let list = await client.channels()
        if expected > 0 {
            try await list.load()
        } else {
            // Nothing cached: load() throws (the server is out of reach and nothing shows).
            _ = try? await list.load()
        }
        var shown = await list.state.channels.count
        let deadline = ContinuousClock.now + .seconds(60)
        while shown < expected, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(1))
            shown = await list.state.channels.count
        }
        let end = ContinuousClock.now
        let cpu = processCPUSeconds() - cpu0
        perf?.disable()
        if await client.connectionStatus.isConnected {
            throw ValidationError("the offline client connected to \(url): give --offline-url where nothing listens")
        }
        await client.disconnect()
        return OpenRun(
            total_ms: ms(end - start), init_ms: ms(made - start), connect_ms: ms(connected - made),
            load_ms: ms(end - connected), channels_shown: shown, client_cpu_ms: round1(cpu * 1000), empty_total_ms: 0,
            empty_connect_ms: 0)
    }

    /// The server's counters that tell what a catch-up asked of it.
    struct ServerCounters {
        var sync = 0.0
        var channelQueries = 0.0
        var listQueries = 0.0
        var delivered = 0.0
        var socketReceipts = 0.0
        var syncSeconds = 0.0
        var cpuSeconds = 0.0

        static func read(_ ticks: TicksTarget) async throws -> ServerCounters {
            let text = String(buffer: try await ticks.http.call(.GET, "\(ticks.baseURL)/metrics"))
            func sum(_ name: String, _ labels: [String] = []) -> Double {
                text.split(separator: "\n")
                    .filter { line in
                        (line.hasPrefix(name + " ") || line.hasPrefix(name + "{"))
                            && labels.allSatisfy { line.contains($0) }
                    }
                    .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
                    .reduce(0, +)
            }
            return ServerCounters(
                sync: sum("ticks_http_requests_total", ["route=\"/sync\""]),
                channelQueries: sum("ticks_http_requests_total", ["route=\"/channels/{type}/{id}/query\""]),
                listQueries: sum("ticks_http_requests_total", ["route=\"/channels\"", "method=\"POST\""]),
                delivered: sum("ticks_http_requests_total", ["route=\"/channels/delivered\""]),
                socketReceipts: sum("ticks_socket_receipts_total"),
                syncSeconds: sum("ticks_http_request_duration_seconds_sum", ["route=\"/sync\""]),
                cpuSeconds: sum("ticks_process_cpu_seconds_total"))
        }
    }

    /// One catch-up: missed events while the reader is away, then a new client on the warmed cache.
    private func syncRun(
        _ run: Int, _ world: World, _ ticks: TicksTarget, token: String, file: URL, warm: (ms: Double, pages: Int),
        perf: PerfControl?
    ) async throws -> SyncRun {
        let cacheBytes = fileBytes(file)
        // A different set of channels each run, the events spread evenly over them.
        let affected = (0..<affectedChannels).map { (run * affectedChannels + $0) % world.cids.count }
        let perChannel = missedEvents / affectedChannels
        let extra = missedEvents % affectedChannels
        var plans: [(index: Int, count: Int)] = []
        for (position, index) in affected.enumerated() {
            plans.append((index, perChannel + (position < extra ? 1 : 0)))
        }
        var senderTokens: [String: String] = [:]
        for sender in world.senders { senderTokens[sender] = try await ticks.tokens.user(sender) }
        let tokens = senderTokens
        let newest = Locked<[ChannelID: String]>([:])
        let makeStart = ContinuousClock.now
        try await forEachConcurrently(plans, width: 16) { plan in
            let cid = world.cids[plan.index]
            let (first, second) = world.senders(of: plan.index)
            // One after the other within a channel, the two senders taking turns.
            for number in 0..<plan.count {
                let sender = number % 2 == 0 ? first : second
                let id = "\(cid.id)-r\(run)m\(number)"
                try await ticks.http.call(
                    .POST, ticks.url("/channels/\(cid.type)/\(cid.id)/message"),
                    headers: ticks.headers(tokens[sender]!),
                    json: "{\"message\": {\"id\": \"\(id)\", \"text\": \"missed \(number) from \(sender)\"}}")
                if number == plan.count - 1 { newest.withLock { $0[cid] = id } }
            }
        }
        let makeMS = ms(ContinuousClock.now - makeStart)
        let expected = newest.withLock { $0 }

        var configuration = try clientConfiguration(ticks.baseURL, ticks, file: file)
        if noMarksDelivered { configuration.marksDelivered = false }
        let before = try await ServerCounters.read(ticks)
        perf?.enable()
        let cpu0 = processCPUSeconds()
        let start = ContinuousClock.now
        let client = try ChatClient(configuration: configuration)
        try await client.connect(userID: world.reader, token: token)
        let connected = ContinuousClock.now
        guard await client.connectionStatus.isConnected else {
            throw ValidationError("the reader could not connect to \(ticks.baseURL)")
        }
        var controllers: [ChannelID: ChannelController] = [:]
        for cid in expected.keys { controllers[cid] = await client.channel(cid) }
        // Each look reads channels in a fixed order until one is not there yet: a snapshot
        // (`ChannelController.state`) costs the SDK's actor time, so only about one is read
        // per look while waiting, and each channel once more when it is complete.
        var pending = expected.keys.sorted { $0.rawValue < $1.rawValue }
        var probeTime = Duration.zero
        var probes = 0
        let deadline = ContinuousClock.now + .seconds(300)
        while !pending.isEmpty, ContinuousClock.now < deadline {
            while let cid = pending.first {
                let probeStart = ContinuousClock.now
                let state = try await controllers[cid]!.state
                probeTime += ContinuousClock.now - probeStart
                probes += 1
                guard state.messages.last?.id == expected[cid] else { break }
                pending.removeFirst()
            }
            if !pending.isEmpty { try await Task.sleep(for: .milliseconds(probeInterval)) }
        }
        let caughtUp = ContinuousClock.now
        let cpu = processCPUSeconds() - cpu0
        perf?.disable()
        let middle = try await ServerCounters.read(ticks)

        // Let the catch-up finish (delivered marks, cache writes) before counting what it asked for.
        var settled = middle
        var quiet = 0
        let settleDeadline = ContinuousClock.now + .seconds(30)
        while quiet < 3, ContinuousClock.now < settleDeadline {
            try await Task.sleep(for: .milliseconds(500))
            let now = try await ServerCounters.read(ticks)
            let same =
                now.sync == settled.sync && now.channelQueries == settled.channelQueries
                && now.listQueries == settled.listQueries && now.delivered == settled.delivered
                && now.socketReceipts == settled.socketReceipts
            quiet = same ? quiet + 1 : 0
            settled = now
        }
        var synced = 0
        for controller in controllers.values {
            if try await controller.state.isSynced { synced += 1 }
        }
        await client.flushCache()
        await client.disconnect()
        let after = try await ServerCounters.read(ticks)
        return SyncRun(
            caught_up_ms: pending.isEmpty ? ms(caughtUp - start) : -1,
            connected_ms: ms(connected - start),
            missed_events: plans.reduce(0) { $0 + $1.count }, affected_channels: plans.count, missing: pending.count,
            synced_channels: synced,
            sync_calls: Int(after.sync - before.sync),
            channel_queries: Int(after.channelQueries - before.channelQueries),
            channel_list_queries: Int(after.listQueries - before.listQueries),
            delivered_calls: Int(after.delivered - before.delivered),
            socket_receipts: Int(after.socketReceipts - before.socketReceipts),
            server_sync_ms: round1((after.syncSeconds - before.syncSeconds) * 1000),
            server_cpu_ms: round1((middle.cpuSeconds - before.cpuSeconds) * 1000),
            client_cpu_ms: round1(cpu * 1000), probe_ms: ms(probeTime), probes: probes, make_events_ms: makeMS,
            warm_ms: warm.ms, warm_pages: warm.pages, cache_file_bytes: cacheBytes)
    }

    // MARK: Reporting

    static func describe(_ result: Result) -> [String] {
        var lines = [
            "sdk-cache: \(result.params["channels"] ?? "?") channels; cache file \(result.cache_file_bytes) bytes;"
                + " warm-up (\(result.warm_pages) list pages) \(result.warm_ms) ms"
        ]
        if let total = result.open_total_ms {
            lines.append("open \(result.params["channels"] ?? "?") cached channels offline: \(total.text)")
            if let i = result.open_init_ms, let c = result.open_connect_ms, let l = result.open_load_ms {
                lines.append(
                    "  medians: ChatClient init \(i.median) ms, connect \(c.median) ms, channels().load() \(l.median) ms"
                )
            }
            if let empty = result.open_empty_total_ms {
                lines.append("  the same open with an empty cache: \(empty.text)")
            }
        }
        if let caught = result.sync_caught_up_ms {
            let events = result.params["missed_events"] ?? "?"
            lines.append("sync after \(events) missed events: \(caught.text)")
            if let connected = result.sync_connected_ms, let calls = result.sync_calls,
                let client = result.sync_client_cpu_ms, let server = result.sync_server_cpu_ms
            {
                lines.append(
                    "  medians: connected \(connected.median) ms, POST /sync calls \(calls.median),"
                        + " client CPU \(client.median) ms, server CPU \(server.median) ms")
            }
            for (index, run) in result.sync_runs.enumerated() {
                lines.append(
                    "  run \(index + 1): \(run.caught_up_ms) ms; /sync \(run.sync_calls) (server \(run.server_sync_ms) ms),"
                        + " channel queries \(run.channel_queries), list queries \(run.channel_list_queries),"
                        + " delivered calls \(run.delivered_calls) + \(run.socket_receipts) on the socket;"
                        + " synced \(run.synced_channels)/\(run.affected_channels), missing \(run.missing);"
                        + " probe \(run.probe_ms) ms in \(run.probes) reads")
            }
        }
        return lines
    }
}

// MARK: Helpers

private func round1(_ value: Double) -> Double { (value * 10).rounded() / 10 }

private func ms(_ duration: Duration) -> Double { round1(duration.seconds * 1000) }

private func progress(_ line: String) {
    FileHandle.standardError.write(Data(("sdk-cache: " + line + "\n").utf8))
}

/// A loopback port nothing listens on (bound, then let go).
private func freePort() throws -> Int {
    #if os(Linux)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard descriptor >= 0 else { throw ValidationError("no socket for a free port") }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
    }
    guard bound == 0 else { throw ValidationError("could not bind a free port") }
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
    }
    guard named == 0 else { throw ValidationError("could not name a free port") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// The SQLite file and its sidecars (journal, WAL).
private func databaseFiles(_ file: URL) -> [URL] {
    ["", "-journal", "-wal", "-shm"].map { URL(fileURLWithPath: file.path + $0) }
}

private func fileBytes(_ file: URL) -> Int {
    databaseFiles(file).reduce(0) { total, url in
        total + ((try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0)
    }
}

private func removeDatabase(_ file: URL) {
    for url in databaseFiles(file) { try? FileManager.default.removeItem(at: url) }
}

private func copyDatabase(_ source: URL, to target: URL) throws {
    removeDatabase(target)
    for (from, to) in zip(databaseFiles(source), databaseFiles(target))
    where FileManager.default.fileExists(atPath: from.path) {
        try FileManager.default.copyItem(at: from, to: to)
    }
}

/// `perf record --control fifo:PATH -D -1`: events counted only between enable and disable.
final class PerfControl: Sendable {
    let handle: FileHandle

    init(path: String) throws {
        guard let handle = FileHandle(forWritingAtPath: path) else {
            throw ValidationError("cannot open the perf control FIFO \(path)")
        }
        self.handle = handle
    }

    func enable() { handle.write(Data("enable\n".utf8)) }
    func disable() { handle.write(Data("disable\n".utf8)) }
}
