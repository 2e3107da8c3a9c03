/** The parts of toolgate's JSON API the page reads. */

/** An entry of `GET /api/confirmations`: a question waiting for its answer. */
export type OpenConfirmation = {
  id: string;
  chatId: string;
  protocol: 'adk' | 'ai-sdk';
  originalFunctionCall: { id: string; name: string; args: unknown };
  hint: string;
  expiresAtMs: number;
  expiresInMs: number;
  editable: boolean;
};

/** An entry of `GET /api/tools`. */
export type ToolInfo = {
  name: string;
  qualifiedName: string;
  description: string;
  parameters: JsonSchema;
  policy: string;
  /** `builtin`, `http`, `mcp` (with `server`), `client` or `application`. */
  source: string;
};

export type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  description?: string;
};

export function authHeaders(apiKey: string): Record<string, string> {
  return apiKey ? { authorization: `Bearer ${apiKey}` } : {};
}

async function getJson<T>(path: string, apiKey: string): Promise<T> {
  const response = await fetch(path, { headers: authHeaders(apiKey) });
  if (!response.ok) {
    const text = await response.text();
    throw new Error(`${path}: ${response.status} ${text}`.trim());
  }
  return (await response.json()) as T;
}

export function openConfirmations(chatId: string, apiKey: string) {
  return getJson<OpenConfirmation[]>(
    `/api/confirmations?chatId=${encodeURIComponent(chatId)}`,
    apiKey,
  );
}

export async function listTools(apiKey: string): Promise<ToolInfo[]> {
  return (await getJson<{ tools: ToolInfo[] }>('/api/tools', apiKey)).tools;
}
