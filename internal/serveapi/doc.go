// Package serveapi is the JSON API by which a process reads an event log
// that another process serves (DESIGN §11 "Reading while another process
// writes"): Pebble locks its folder even for readers, so the forkline
// command reads a log held by `forkline serve` through that process.
//
// # Wire
//
// The types of this package are the answers of the /api/ endpoints of
// webui.Handler; [Log] is the client that turns them back into an
// [eventlog.IndexedLog]. Events travel as records (eventlog.AppendRecord,
// bound to the execution asked for and the seq) beside their JSON for
// people, so a reader decodes exactly what the store holds, and a record
// served for another execution or seq fails its checksum. Long reads come in pages (PageSize) and
// are cut at the head the first page saw, as [eventlog.Log.Events]
// promises. Errors come back as [Error] with a code that maps to the log's
// sentinels, so errors.Is(err, eventlog.ErrNotFound) holds through the
// wire.
//
// # Advertising
//
// A serving process that writes an [Advert] into its data folder
// (AdvertFile, mode 0600) lets readers find it: [ReadAdvert] reads the
// file, and [Dial] presents the advertised token on every request
// ("Authorization: Bearer TOKEN"), which the server demands of every
// request, and refuses a server that does not answer with [Proof] of the
// token in ProofHeader, so a stale file left by a crash never sends a
// reader to whatever took the address since. The token itself is never in
// an answer.
package serveapi
