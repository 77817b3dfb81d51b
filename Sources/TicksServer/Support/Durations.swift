extension Duration {
    /// Whole microseconds (the unit of stored times).
    var wholeMicroseconds: Int64 { components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000 }

    /// In seconds, with the fraction (JSON settings, token expiries, rates).
    var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
