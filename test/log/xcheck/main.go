// The stock implementation's side of the cross-check (test/log/go-xcheck.test.ts): Go's
// golang.org/x/mod/sumdb/note and sumdb/tlog, from Debian's golang-golang-x-mod-dev, built
// offline in GOPATH mode. Two modes, JSON on stdout:
//
//	xcheck gen      keys, signed notes, tree hashes, inclusion and consistency proofs and tiles,
//	                made by x/mod, for the SDK to verify
//	xcheck verify   reads what the SDK made (notes, checkpoints, proofs, each with the verdict
//	                the SDK gave) on stdin, and answers x/mod's verdict for each
package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// A deterministic byte stream (SHA-256 in counter mode), so generated keys are stable.
type detRand struct {
	seed    string
	counter int
	buf     []byte
}

func (r *detRand) Read(p []byte) (int, error) {
	for i := range p {
		if len(r.buf) == 0 {
			h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", r.seed, r.counter)))
			r.counter++
			r.buf = h[:]
		}
		p[i] = r.buf[0]
		r.buf = r.buf[1:]
	}
	return len(p), nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func entry(i int64) []byte { return []byte(fmt.Sprintf("ctl xcheck entry %d\n", i)) }

// hashStore keeps every stored hash of a tree built with tlog.StoredHashes.
type hashStore []tlog.Hash

func (s hashStore) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x >= int64(len(s)) {
			return nil, fmt.Errorf("no stored hash %d", x)
		}
		out[i] = s[x]
	}
	return out, nil
}

func build(n int64) hashStore {
	var s hashStore
	for i := int64(0); i < n; i++ {
		hs, err := tlog.StoredHashes(i, entry(i), s)
		must(err)
		s = append(s, hs...)
	}
	return s
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type key struct{ Name, Vkey, Skey string }
type signed struct {
	Text  string
	Note  string
	Vkeys []string
}
type inclusion struct {
	Size, Index int64
	Proof       []string
	Root        string
}
type consistency struct {
	Size1, Size2 int64
	Proof        []string
	Root1, Root2 string
}
type tile struct{ Path, GoPath, Data string }

func gen() {
	var keys []key
	var signers []note.Signer
	for _, name := range []string{"ctl.example/gateway-log", "ctl.example/authority-log", "witness.example/w1"} {
		skey, vkey, err := note.GenerateKey(&detRand{seed: name}, name)
		must(err)
		s, err := note.NewSigner(skey)
		must(err)
		keys = append(keys, key{name, vkey, skey})
		signers = append(signers, s)
	}
	var notes []signed
	texts := []string{
		"If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n",
		"Ognuno sta solo sul cuor della terra\ntrafitto da un raggio di sole:\n\ned è subito sera.\n",
		string(tlog.FormatTree(tlog.Tree{N: 5, Hash: tlog.RecordHash([]byte("x"))})),
	}
	for i, text := range texts {
		one, err := note.Sign(&note.Note{Text: text}, signers[i%2])
		must(err)
		notes = append(notes, signed{text, string(one), []string{keys[i%2].Vkey}})
		two, err := note.Sign(&note.Note{Text: text}, signers[0], signers[1], signers[2])
		must(err)
		notes = append(notes, signed{text, string(two), []string{keys[0].Vkey, keys[1].Vkey, keys[2].Vkey}})
	}

	const n = 70000
	s := build(n)
	var incl []inclusion
	var cons []consistency
	sizes := []int64{1, 2, 3, 7, 8, 9, 255, 256, 257, 1000, 65535, 65536, 65537, 70000}
	roots := map[int64]tlog.Hash{}
	for _, t := range sizes {
		h, err := tlog.TreeHash(t, s)
		must(err)
		roots[t] = h
	}
	for _, t := range sizes {
		for _, i := range []int64{0, 1, t / 2, t - 2, t - 1} {
			if i < 0 || i >= t {
				continue
			}
			p, err := tlog.ProveRecord(t, i, s)
			must(err)
			var ps []string
			for _, h := range p {
				ps = append(ps, b64(h[:]))
			}
			r := roots[t]
			incl = append(incl, inclusion{t, i, ps, b64(r[:])})
		}
		for _, m := range sizes {
			if m > t {
				continue
			}
			p, err := tlog.ProveTree(t, m, s)
			must(err)
			var ps []string
			for _, h := range p {
				ps = append(ps, b64(h[:]))
			}
			r1, r2 := roots[m], roots[t]
			cons = append(cons, consistency{m, t, ps, b64(r1[:]), b64(r2[:])})
		}
	}
	var tiles []tile
	for _, t := range tlog.NewTiles(8, 0, n) {
		data, err := tlog.ReadTileData(t, s)
		must(err)
		// x/mod names tiles tile/<H>/<L>/<N>; C2SP tlog-tiles has no <H> (always 8).
		tiles = append(tiles, tile{strings.Replace(t.Path(), "tile/8/", "tile/", 1), t.Path(), b64(data)})
	}
	out := map[string]interface{}{
		"keys": keys, "notes": notes, "entryFormat": "ctl xcheck entry %d\\n", "size": n,
		"inclusion": incl, "consistency": cons, "tiles": tiles,
		"goSumTree": string(tlog.FormatTree(tlog.Tree{N: n, Hash: roots[int64(n)]})),
	}
	must(json.NewEncoder(os.Stdout).Encode(out))
}

type verifyIn struct {
	Notes []struct {
		Note  string
		Vkeys []string
	}
	Trees   []struct{ Text string }
	Records []struct {
		Size, Index int64
		Proof       []string
		Root, Leaf  string
	}
	Prefixes []struct {
		Size1, Size2 int64
		Proof        []string
		Root1, Root2 string
	}
	TilePaths []string
}

func hashes(list []string) []tlog.Hash {
	var out []tlog.Hash
	for _, s := range list {
		out = append(out, hash(s))
	}
	return out
}

func hash(s string) tlog.Hash {
	var h tlog.Hash
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h // a wrong hash: x/mod refuses the proof
	}
	copy(h[:], b)
	return h
}

func verify() {
	var in verifyIn
	must(json.NewDecoder(os.Stdin).Decode(&in))
	res := map[string][]string{}
	for _, n := range in.Notes {
		var vs []note.Verifier
		verdict := ""
		for _, k := range n.Vkeys {
			v, err := note.NewVerifier(k)
			if err != nil {
				verdict = "bad vkey: " + err.Error()
			}
			vs = append(vs, v)
		}
		if verdict == "" {
			if opened, err := note.Open([]byte(n.Note), note.VerifierList(vs...)); err != nil {
				verdict = "refused: " + err.Error()
			} else {
				verdict = fmt.Sprintf("ok %d", len(opened.Sigs))
			}
		}
		res["notes"] = append(res["notes"], verdict)
	}
	for _, t := range in.Trees {
		tree, err := tlog.ParseTree([]byte(t.Text))
		if err != nil {
			res["trees"] = append(res["trees"], "refused")
		} else {
			res["trees"] = append(res["trees"], fmt.Sprintf("%d %s", tree.N, b64(tree.Hash[:])))
		}
	}
	for _, r := range in.Records {
		err := tlog.CheckRecord(tlog.RecordProof(hashes(r.Proof)), r.Size, hash(r.Root), r.Index, hash(r.Leaf))
		res["records"] = append(res["records"], verdictOf(err))
	}
	for _, p := range in.Prefixes {
		err := tlog.CheckTree(tlog.TreeProof(hashes(p.Proof)), p.Size2, hash(p.Root2), p.Size1, hash(p.Root1))
		res["prefixes"] = append(res["prefixes"], verdictOf(err))
	}
	for _, p := range in.TilePaths {
		t, err := tlog.ParseTilePath(strings.Replace(p, "tile/", "tile/8/", 1))
		if err != nil {
			res["tilePaths"] = append(res["tilePaths"], "refused")
		} else {
			res["tilePaths"] = append(res["tilePaths"], fmt.Sprintf("%d %d %d", t.L, t.N, t.W))
		}
	}
	must(json.NewEncoder(os.Stdout).Encode(res))
}

func verdictOf(err error) string {
	if err != nil {
		return "refused"
	}
	return "ok"
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: xcheck gen | verify")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "gen":
		gen()
	case "verify":
		verify()
	default:
		os.Exit(2)
	}
}
