// Issue 28's acceptance scenario with Microsoft's DebugClient (@vscode/debugadapter-testsupport),
// which never answers a reverse request: it cannot open child sessions. Attaches once with
// "raydebug": {"group": true} to the hub on 127.0.0.1:PORT and prints what it saw as one JSON
// line; tests/integration/test_group_job.py spawns the processes and checks the report.
//
//   node group_job.js PORT PAUSED_COUNT RUNNING_PID
"use strict";
const { DebugClient } = require("@vscode/debugadapter-testsupport");

const [port, pausedCount, runningPid] = process.argv.slice(2).map(Number);
const TIMEOUT = 60000;

function pidIn(name) {
  const match = /pid (\d+)/.exec(name);
  if (!match) throw new Error(`no pid in thread name ${name}`);
  return Number(match[1]);
}

async function main() {
  const dc = new DebugClient("node", "unused", "debugpy");
  const events = [];       // every event, in order
  const reverse = [];      // every reverse request (startDebugging would land here)
  const dispatch = dc.dispatch.bind(dc);
  dc.dispatch = (body) => {
    const message = JSON.parse(body);
    if (message.type === "request") reverse.push(message.command);
    if (message.type === "event") events.push(message);
    dispatch(body);
  };
  const waitFor = (test, what) => new Promise((resolve, reject) => {
    const started = Date.now();
    let seen = 0;
    const look = () => {
      for (; seen < events.length; seen++) {
        if (test(events[seen])) { const found = events[seen]; events.splice(seen, 1); return resolve(found); }
      }
      if (Date.now() - started > TIMEOUT) return reject(new Error(`no ${what} within ${TIMEOUT} ms`));
      seen = 0;
      setTimeout(look, 20);
    };
    look();
  });
  const request = (command, args) => dc.customRequest(command, args).then(r => r.body);
  const threadPids = async () => {
    const { threads } = await request("threads");
    return new Map(threads.map(t => [t.id, pidIn(t.name)]));
  };

  await dc.start(port);
  await dc.initializeRequest({ adapterID: "debugpy", clientID: "vscode-testsupport",
    linesStartAt1: true, columnsStartAt1: true, pathFormat: "path",
    supportsStartDebuggingRequest: false });
  const attached = dc.attachRequest({ name: "job", raydebug: { group: true } });
  await waitFor(e => e.event === "initialized", "initialized");
  await attached;
  await dc.configurationDoneRequest();
  const stopped = [];
  for (let i = 0; i < pausedCount; i++) stopped.push(await waitFor(e => e.event === "stopped", "stopped"));

  const report = { threadNames: [], evaluated: {}, stepped: null, otherAnswered: null,
                   pausedRunning: null, allThreadsContinued: null, reverse };
  const { threads } = await request("threads");
  report.threadNames = threads.map(t => t.name);
  const pidOf = new Map(threads.map(t => [t.id, pidIn(t.name)]));

  const frames = new Map();
  for (const event of stopped) {
    const thread = event.body.threadId;
    const [top] = (await request("stackTrace", { threadId: thread })).stackFrames;
    const pid = (await request("evaluate", { expression: "os.getpid()", frameId: top.id, context: "repl" })).result;
    const rank = (await request("evaluate", { expression: "rank", frameId: top.id, context: "repl" })).result;
    report.evaluated[pidOf.get(thread)] = { pid: Number(pid), rank: Number(rank), line: top.line };
    frames.set(thread, top.id);
  }

  const [stepping, other] = stopped.slice(0, 2).map(e => e.body.threadId);
  const step = request("next", { threadId: stepping });
  report.otherAnswered = Number((await request("evaluate", { expression: "rank", frameId: frames.get(other), context: "repl" })).result);
  await step;
  await waitFor(e => e.event === "stopped" && e.body.threadId === stepping, "the step's stop");
  const [afterStep] = (await request("stackTrace", { threadId: stepping })).stackFrames;
  report.stepped = { pid: pidOf.get(stepping), line: afterStep.line };

  const spinning = [...pidOf].find(([, pid]) => pid === runningPid)[0];
  await request("pause", { threadId: spinning });
  for (;;) {
    const event = await waitFor(e => e.event === "stopped", "the paused process's stop");
    if ((await threadPids()).get(event.body.threadId) === runningPid) {
      const trace = await request("stackTrace", { threadId: event.body.threadId });
      report.pausedRunning = trace.stackFrames.map(f => f.name);
      break;
    }
  }

  report.allThreadsContinued = (await request("continue", { threadId: stepping })).allThreadsContinued;
  await dc.disconnectRequest({});
  dc.stopAdapter();
  console.log(JSON.stringify(report));
}

main().catch(error => { console.error(error.stack || String(error)); process.exit(1); });
