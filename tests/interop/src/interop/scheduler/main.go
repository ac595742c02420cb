// A small framework scheduler on mesos-go's v1 httpsched client, as Debian ships it. It
// drives the dev cluster through one task's life and prints what it saw, one
// "REPORT ..." line per step, for tests/interop.rs to check. Exit 0 when every step
// happened, 1 (after a "FAIL ..." line) otherwise.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	mesos "github.com/mesos/mesos-go/api/v1/lib"
	"github.com/mesos/mesos-go/api/v1/lib/encoding"
	"github.com/mesos/mesos-go/api/v1/lib/encoding/codecs"
	"github.com/mesos/mesos-go/api/v1/lib/httpcli"
	"github.com/mesos/mesos-go/api/v1/lib/httpcli/httpsched"
	"github.com/mesos/mesos-go/api/v1/lib/scheduler"
	"github.com/mesos/mesos-go/api/v1/lib/scheduler/calls"
)

const (
	taskID     = "interop-task"
	executorID = "interop-exec"
)

func report(format string, args ...interface{}) {
	fmt.Printf("REPORT "+format+"\n", args...)
}

func fail(format string, args ...interface{}) {
	fmt.Printf("FAIL "+format+"\n", args...)
	os.Exit(1)
}

// exchanges records each HTTP exchange (host and status), to show the 307 was followed.
type exchanges struct {
	sync.Mutex
	seen []string
}

func (x *exchanges) wrap(do httpcli.DoFunc) httpcli.DoFunc {
	return func(req *http.Request) (*http.Response, error) {
		res, err := do(req)
		if err == nil {
			x.Lock()
			x.seen = append(x.seen, fmt.Sprintf("%s=%d", req.URL.Host, res.StatusCode))
			x.Unlock()
		}
		return res, err
	}
}

func scalar(name string, v float64) mesos.Resource {
	return mesos.Resource{Name: name, Type: mesos.SCALAR.Enum(), Scalar: &mesos.Value_Scalar{Value: v}}
}

func main() {
	master := flag.String("master", "", "scheduler API URL of a master (the standby: the client must follow its 307)")
	codecName := flag.String("codec", "protobuf", "protobuf or json")
	executorBin := flag.String("executor", "", "path of the interop executor binary")
	executorCodec := flag.String("executor-codec", "protobuf", "the executor's codec")
	executorReport := flag.String("executor-report", "", "file the executor appends its report to")
	timeout := flag.Duration("timeout", 60*time.Second, "give up after this long")
	flag.Parse()

	codec, ok := map[string]encoding.MediaType{"protobuf": codecs.MediaTypeProtobuf, "json": codecs.MediaTypeJSON}[*codecName]
	if !ok {
		fail("unknown codec %q", *codecName)
	}
	x := &exchanges{}
	cli := httpcli.New(
		httpcli.Endpoint(*master),
		httpcli.Codec(codecs.ByMediaType[codec]),
		httpcli.Do(x.wrap(httpcli.With(httpcli.Timeout(5*time.Second)))),
	)
	caller := httpsched.NewCaller(cli)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	failover := 60.0
	checkpoint := true
	resp, err := caller.Call(ctx, calls.Subscribe(&mesos.FrameworkInfo{
		User: "root", Name: "interop-" + *codecName, FailoverTimeout: &failover, Checkpoint: &checkpoint,
	}))
	if err != nil {
		fail("subscribe: %v", err)
	}
	defer resp.Close()
	x.Lock()
	report("exchanges %v", x.seen)
	x.Unlock()

	events := make(chan *scheduler.Event)
	ended := make(chan error, 1)
	go func() {
		for {
			var e scheduler.Event
			if err := resp.Decode(&e); err != nil {
				ended <- err
				return
			}
			events <- &e
		}
	}()

	var (
		fid       string
		launched  bool
		phase     = "launch"
		heartbeat int
	)
	send := func(what string, c *scheduler.Call) {
		if err := calls.CallNoData(ctx, caller, c.With(calls.Framework(fid))); err != nil {
			fail("%s: %v", what, err)
		}
	}
	// Kill once reconciliation is done and heartbeats have come.
	maybeKill := func() {
		if phase == "heartbeats" && heartbeat >= 2 {
			report("heartbeats %d", heartbeat)
			phase = "kill"
			send("kill", calls.Kill(taskID, ""))
		}
	}
	for {
		var e *scheduler.Event
		select {
		case e = <-events:
		case err := <-ended:
			if phase == "teardown" && err == io.EOF {
				report("stream closed after teardown")
				report("done")
				return
			}
			fail("event stream ended in phase %s: %v", phase, err)
		case <-ctx.Done():
			fail("timed out in phase %s", phase)
		}
		switch e.GetType() {
		case scheduler.Event_SUBSCRIBED:
			s := e.GetSubscribed()
			fid = s.FrameworkID.Value
			report("subscribed framework=%s heartbeat=%v", fid, s.GetHeartbeatIntervalSeconds())
		case scheduler.Event_HEARTBEAT:
			heartbeat++
			maybeKill()
		case scheduler.Event_OFFERS:
			var ids []mesos.OfferID
			for _, o := range e.GetOffers().Offers {
				if launched {
					ids = append(ids, o.ID)
					continue
				}
				launched = true
				task := mesos.TaskInfo{
					Name:      taskID,
					TaskID:    mesos.TaskID{Value: taskID},
					AgentID:   o.AgentID,
					Resources: []mesos.Resource{scalar("cpus", 0.1), scalar("mem", 32)},
					Executor: &mesos.ExecutorInfo{
						// The library always sends `type` (it is not nullable there), and a
						// master refuses any type but CUSTOM in a LAUNCH.
						Type:       mesos.ExecutorInfo_CUSTOM,
						ExecutorID: mesos.ExecutorID{Value: executorID},
						Resources:  []mesos.Resource{scalar("cpus", 0.1), scalar("mem", 32)},
						Command: &mesos.CommandInfo{
							Value: executorBin,
							Environment: &mesos.Environment{Variables: []mesos.Environment_Variable{
								{Name: "INTEROP_CODEC", Value: executorCodec},
								{Name: "INTEROP_REPORT", Value: executorReport},
							}},
						},
					},
				}
				accept := calls.Accept(calls.OfferOperations{calls.OpLaunch(task)}.WithOffers(o.ID))
				send("accept", accept)
				report("launched %s on %s", taskID, o.Hostname)
			}
			if len(ids) > 0 {
				send("decline", calls.Decline(ids...).With(calls.RefuseSeconds(time.Hour)))
			}
		case scheduler.Event_UPDATE:
			st := e.GetUpdate().Status
			reason := st.GetReason().String()
			if st.Reason == nil {
				reason = "none"
			}
			report("update %s %s reason=%s", st.TaskID.Value, st.GetState(), reason)
			switch st.GetState() {
			case mesos.TASK_ERROR, mesos.TASK_FAILED, mesos.TASK_LOST, mesos.TASK_DROPPED:
				fail("task %s %s: %s", st.TaskID.Value, st.GetState(), st.GetMessage())
			}
			if len(st.UUID) > 0 {
				send("acknowledge", calls.Acknowledge(st.AgentID.Value, st.TaskID.Value, st.UUID))
				report("acknowledged %s", st.GetState())
			}
			switch {
			case phase == "launch" && st.GetState() == mesos.TASK_RUNNING:
				phase = "explicit"
				send("explicit reconcile", calls.Reconcile(calls.ReconcileTasks(map[string]string{taskID: st.AgentID.Value})))
			case phase == "explicit" && st.Reason != nil && *st.Reason == mesos.REASON_RECONCILIATION:
				report("reconciled explicit %s", st.GetState())
				phase = "implicit"
				send("implicit reconcile", calls.Reconcile(calls.ReconcileTasks(nil)))
			case phase == "implicit" && st.Reason != nil && *st.Reason == mesos.REASON_RECONCILIATION:
				report("reconciled implicit %s", st.GetState())
				phase = "heartbeats"
				maybeKill()
			case phase == "kill" && st.GetState() == mesos.TASK_KILLED:
				phase = "teardown"
				send("teardown", &scheduler.Call{Type: scheduler.Call_TEARDOWN})
				report("teardown")
			}
		case scheduler.Event_MESSAGE:
			report("message from %s: %s", e.GetMessage().ExecutorID.Value, e.GetMessage().Data)
		case scheduler.Event_FAILURE:
			report("failure %v", e.GetFailure())
		case scheduler.Event_ERROR:
			fail("error event: %s", e.GetError().Message)
		}
	}
}
