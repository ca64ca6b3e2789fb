"use strict";
// context-kernel-parity capture harness: deterministic clock, seeded randomness and a
// closed network for one legacy capture.  This file is this project's own code; it runs
// the legacy JavaScript of the user's checkout and never contains any of it.
//
// Order of use (LEGACY.md, "Reproducing a capture byte for byte"):
//   const det = require("./determinism.cjs");
//   det.install();              // patches Date, crypto and Math.random, closes the network
//   ... import / require the legacy modules (some draw a random id at import time) ...
//   det.reset({baseMs, stepMs, label});   // the capture's own clock and stream start here
const crypto = require("node:crypto");
const net = require("node:net");
const tls = require("node:tls");
const dns = require("node:dns");
const http = require("node:http");
const https = require("node:https");

const RealDate = Date;
const realRandomBytes = crypto.randomBytes;
const realRandomUUID = crypto.randomUUID;
const realRandomFillSync = crypto.randomFillSync;
const realGetRandomValues = crypto.getRandomValues;

const state = { frozen: false, baseMs: 0, stepMs: 0, calls: 0, next: null, label: null,
  networkAttempts: [] };

function mulberry32(seed) {
  let a = seed >>> 0;
  return function next() {
    a |= 0;
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function seedFor(label) {
  const hex = crypto.createHash("sha256").update(String(label), "utf8").digest("hex");
  return parseInt(hex.slice(0, 8), 16);
}

function draw() {
  if (!state.next) return realRandomBytes(4).readUInt32BE(0) / 4294967296;
  return state.next();
}

function bytes(n) {
  const out = Buffer.alloc(n);
  for (let i = 0; i < n; i += 1) out[i] = Math.floor(draw() * 256);
  return out;
}

function nowMs() {
  if (!state.frozen) return RealDate.now();
  const t = state.baseMs + state.calls * state.stepMs;
  state.calls += 1;
  return t;
}

class FakeDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(nowMs());
    else super(...args);
  }
  static now() { return nowMs(); }
}
FakeDate.parse = RealDate.parse;
FakeDate.UTC = RealDate.UTC;

function uuidFrom(b) {
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function blocked(kind, target) {
  state.networkAttempts.push({ kind, target: String(target || "") });
  const err = new Error(`network access is closed during a legacy capture (${kind})`);
  err.code = "ECAPTURENETWORK";
  return err;
}

function describeTarget(args) {
  const a = args[0];
  if (a && typeof a === "object") return `${a.host || a.hostname || a.path || ""}:${a.port || ""}`;
  return String(a === undefined ? "" : a);
}

function closeNetwork() {
  net.Socket.prototype.connect = function connect(...args) {
    throw blocked("net.connect", describeTarget(args));
  };
  tls.connect = function connect(...args) { throw blocked("tls.connect", describeTarget(args)); };
  for (const mod of [http, https]) {
    mod.request = function request(...args) { throw blocked("http.request", describeTarget(args)); };
    mod.get = function get(...args) { throw blocked("http.get", describeTarget(args)); };
  }
  dns.lookup = function lookup(host) { throw blocked("dns.lookup", host); };
  for (const name of Object.keys(dns)) {
    if (/^resolve/.test(name) && typeof dns[name] === "function") {
      dns[name] = function resolve(host) { throw blocked(`dns.${name}`, host); };
    }
  }
  if (dns.promises) {
    dns.promises.lookup = async (host) => { throw blocked("dns.lookup", host); };
    for (const name of Object.keys(dns.promises)) {
      if (/^resolve/.test(name) && typeof dns.promises[name] === "function") {
        dns.promises[name] = async (host) => { throw blocked(`dns.promises.${name}`, host); };
      }
    }
  }
  const dgram = require("node:dgram");
  dgram.createSocket = function createSocket() { throw blocked("dgram.createSocket", ""); };
  globalThis.fetch = async function fetch(url) { throw blocked("fetch", url && url.url ? url.url : url); };
  if (typeof globalThis.WebSocket === "function") {
    globalThis.WebSocket = function WebSocket(url) { throw blocked("WebSocket", url); };
  }
}

function install() {
  globalThis.Date = FakeDate;
  Math.random = () => draw();
  crypto.randomBytes = function randomBytes(n, cb) {
    const out = bytes(n);
    if (typeof cb === "function") { process.nextTick(cb, null, out); return undefined; }
    return out;
  };
  crypto.randomUUID = function randomUUID() { return uuidFrom(bytes(16)); };
  crypto.randomFillSync = function randomFillSync(buf, offset = 0, size) {
    const view = Buffer.from(buf.buffer || buf, buf.byteOffset || 0, buf.byteLength || buf.length);
    const end = size === undefined ? view.length : offset + size;
    for (let i = offset; i < end; i += 1) view[i] = Math.floor(draw() * 256);
    return buf;
  };
  const fillValues = function getRandomValues(arr) {
    const view = Buffer.from(arr.buffer, arr.byteOffset, arr.byteLength);
    for (let i = 0; i < view.length; i += 1) view[i] = Math.floor(draw() * 256);
    return arr;
  };
  for (const [obj, key, value] of [[crypto, "getRandomValues", fillValues],
    [crypto.webcrypto, "getRandomValues", fillValues],
    [crypto.webcrypto, "randomUUID", crypto.randomUUID]]) {
    try {
      Object.defineProperty(obj, key, { value, configurable: true, writable: true });
    } catch (_e) { /* a non-configurable property keeps the real source */ }
  }
  closeNetwork();
}

function reset({ baseMs, stepMs, label }) {
  state.frozen = true;
  state.baseMs = baseMs;
  state.stepMs = stepMs;
  state.calls = 0;
  state.label = label;
  state.next = mulberry32(seedFor(label));
}

/** Keep the clock where it is but restart it at ``baseMs`` (per-store injected clocks). */
function injectedNow(startMs, stepMs) {
  let t = startMs - stepMs;
  const fn = function injectedNow() { t += stepMs; return t; };
  return fn;
}

function isoOf(ms) { return new RealDate(ms).toISOString(); }

function determinismRecord(stepMs) {
  return {
    clock: { Date: "fake", base_ms: state.baseMs, base_iso: isoOf(state.baseMs),
      step_ms_per_call: stepMs },
    random: {
      "crypto.randomBytes": "seeded",
      "crypto.randomUUID": "seeded",
      "Math.random": "seeded",
      seed_label: state.label,
      prng: "mulberry32(sha256(label)[0:8])",
    },
  };
}

/** The exact bytes of a capture file: JSON.stringify(value, null, 2) and a final newline. */
function captureText(value) { return `${JSON.stringify(value, null, 2)}\n`; }

function errorRecord(err) {
  if (err === null || err === undefined) return null;
  const out = { name: err && err.name ? err.name : "Error", message: err && err.message !== undefined ? String(err.message) : String(err) };
  out.code = err && err.code !== undefined ? err.code : null;
  return out;
}

function networkAttempts() { return state.networkAttempts.slice(); }

module.exports = { install, reset, injectedNow, determinismRecord, captureText, errorRecord,
  networkAttempts, isoOf, RealDate, realRandomUUID, realRandomFillSync, realGetRandomValues };
