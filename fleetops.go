package llmrelay

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/llmrelay/caddy-llm-relay/internal/sharedstate"
)

// One key's commands in a fleet round trip (fleet.go), and what the
// relay makes of Redis's answers: each key goes through the shared state
// script (internal/sharedstate), or plain commands where Redis refuses
// scripts, and its answer is its own. An error Redis answers for one key
// is that key's problem, named once (settle); only a failed round trip,
// or a Redis that refuses every key, fails the round.

// fleetOp is one key's commands in a round.
type fleetOp interface {
	// replyErr is the first error Redis answered for the key's
	// commands (nil: none).
	replyErr() error
}

// fleetScript is the shared state script (internal/sharedstate), loaded
// at the head of every round (a Redis restarted since has forgotten it;
// loading a script it holds costs a hash lookup).
var fleetScript = redis.NewScript(sharedstate.Script)

// noScriptsFor is how long the relay uses plain commands after Redis
// refused to load the script (an ACL without @scripting, a proxy without
// EVALSHA) before it tries again.
const noScriptsFor = 10 * time.Minute

// problemKeep is how long a problem with a key the relay reads no more
// (yesterday's spend, an alert's claim) stays in the status view.
const problemKeep = 10 * time.Minute

// hashOp is one hash's round trip: this instance's fields written (with
// the hash's expiry), and the hash read back within sharedstate's bounds.
type hashOp struct {
	key      string
	pairs    []string // field, value, ...
	expireAt time.Time
	expireIn time.Duration
	script   *redis.Cmd
	writes   []redis.Cmder             // without the script
	get      *redis.MapStringStringCmd // without the script
}

func (o *hashOp) queue(ctx context.Context, pipe redis.Pipeliner, scripted bool) *hashOp {
	if scripted {
		o.script = pipe.EvalSha(ctx, fleetScript.Hash(), []string{o.key}, sharedstate.HashArgs(o.pairs, o.expireAt, o.expireIn)...)
		return o
	}
	if len(o.pairs) > 0 {
		args := make([]any, len(o.pairs))
		for i, p := range o.pairs {
			args[i] = p
		}
		o.writes = append(o.writes, pipe.HSet(ctx, o.key, args...))
		switch {
		case !o.expireAt.IsZero():
			o.writes = append(o.writes, pipe.PExpireAt(ctx, o.key, o.expireAt))
		case o.expireIn > 0:
			o.writes = append(o.writes, pipe.PExpire(ctx, o.key, o.expireIn))
		}
	}
	o.get = pipe.HGetAll(ctx, o.key)
	return o
}

func (o *hashOp) replyErr() error {
	if o.script != nil {
		return o.script.Err()
	}
	for _, w := range o.writes {
		if err := w.Err(); err != nil {
			return err
		}
	}
	return o.get.Err()
}

// result is the hash as read, or why the key is skipped.
func (o *hashOp) result() (sharedstate.Hash, error) {
	if err := o.replyErr(); err != nil {
		return sharedstate.Hash{}, keyProblem(err)
	}
	if o.script != nil {
		return sharedstate.DecodeHash(o.script.Val())
	}
	return sharedstate.FromMap(o.get.Val())
}

// claimOp claims a budget alert for the fleet.
type claimOp struct {
	key    string
	script *redis.Cmd
	setNX  *redis.BoolCmd   // without the script
	get    *redis.StringCmd // without the script
}

func (o *claimOp) replyErr() error {
	if o.script != nil {
		return o.script.Err()
	}
	if err := o.setNX.Err(); err != nil {
		return err
	}
	if err := o.get.Err(); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return nil
}

func (o *claimOp) result() (sharedstate.Claim, error) {
	if err := o.replyErr(); err != nil {
		return sharedstate.Claim{}, keyProblem(err)
	}
	if o.script != nil {
		return sharedstate.DecodeClaim(o.script.Val())
	}
	return sharedstate.Claim{Won: o.setNX.Val(), Holder: o.get.Val()}, nil
}

// keyProblem is a key's problem for a reply error.
func keyProblem(err error) error {
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		return sharedstate.WrongTypeError()
	}
	return sharedstate.KeyProblem("Redis answered: " + err.Error())
}

// isReply reports whether err is Redis's answer to one command (which
// is that command's business) rather than a failed round trip.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// everyOpRefused returns the first reply error when every key's commands
// got one, none of them WRONGTYPE: Redis refuses the relay, not a key.
func everyOpRefused(ops []fleetOp) error {
	var first error
	for _, o := range ops {
		err := o.replyErr()
		if err == nil || redis.HasErrorPrefix(err, "WRONGTYPE") {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// scripted reports whether this round uses the shared state script.
func (f *fleetState) scripted(now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return now.After(f.noScriptsUntil)
}

// refuseScripts records that Redis would not load the script: the relay
// uses plain commands for a while (logged the first time).
func (f *fleetState) refuseScripts(now time.Time, err error) {
	f.mu.Lock()
	f.noScriptsUntil = now.Add(noScriptsFor)
	warned := f.scriptsWarned
	f.scriptsWarned = true
	f.mu.Unlock()
	if !warned {
		f.logger.Warn("shared state: Redis refuses scripts; using plain commands, which read each hash whole before its bounds are checked, and may set an expiry on another application's key",
			zap.Error(err), zap.Duration("retry_in", noScriptsFor))
	}
}

// settle records the problems of every key read this round: a new or
// changed one is logged once (WARN), one gone once (INFO); keys not read
// for problemKeep are forgotten.
func (f *fleetState) settle(r *round) {
	f.mu.Lock()
	var added, over []sharedstate.Named
	for key, probs := range r.problems {
		a, o := f.problems.Settle(key, probs, r.now)
		added, over = append(added, a...), append(over, o...)
	}
	f.problems.Prune(r.now.Add(-problemKeep))
	f.mu.Unlock()
	for _, n := range added {
		f.logger.Warn("shared state entry skipped", append(entryFields(n), zap.String("problem", n.What))...)
	}
	for _, n := range over {
		f.logger.Info("shared state entry readable again", entryFields(n)...)
	}
}

// entryFields name a problem's key, and its field when it is one.
func entryFields(n sharedstate.Named) []zap.Field {
	if n.Field == "" {
		return []zap.Field{zap.String("key", n.Key)}
	}
	return []zap.Field{zap.String("key", n.Key), zap.String("field", n.Field)}
}
