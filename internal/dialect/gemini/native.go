package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
)

// KeepNative puts back into a Gemini request translated from a Gemini
// client's Chat pivot (FromChatRequest of ToChatRequest, with the relay's
// changes between) what the pivot has no place for and the client sent:
//
//	safetySettings                          as sent
//	generationConfig.topK                   as sent
//	generationConfig.thinkingConfig         includeThoughts as sent, unless
//	  .includeThoughts                      the translation set it or turned
//	                                        thinking off (thinkingBudget 0)
//
// Only members the translation does not have are added: whatever the
// relay set on the way (a budget, a cap) stands. Everything else the
// client sent was translated or refused by ToChatRequest. native is the
// client's generateContent body; translated is returned as it is when
// native has none of these.
func KeepNative(translated, native []byte) ([]byte, error) {
	var from struct {
		SafetySettings   json.RawMessage `json:"safetySettings"`
		GenerationConfig struct {
			TopK           json.RawMessage `json:"topK"`
			ThinkingConfig struct {
				IncludeThoughts json.RawMessage `json:"includeThoughts"`
			} `json:"thinkingConfig"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(native, &from); err != nil {
		return nil, fmt.Errorf("gemini: the client's own body: %w", err)
	}
	safety, topK, include := !isNullOrAbsent(from.SafetySettings), !isNullOrAbsent(from.GenerationConfig.TopK),
		!isNullOrAbsent(from.GenerationConfig.ThinkingConfig.IncludeThoughts)
	if !safety && !topK && !include {
		return translated, nil
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(translated, &out); err != nil {
		return nil, fmt.Errorf("gemini: the translated body: %w", err)
	}
	if out == nil {
		return nil, errors.New("gemini: the translated body is null, not an object")
	}
	if _, ok := out["safetySettings"]; safety && !ok {
		out["safetySettings"] = from.SafetySettings
	}
	if topK || include {
		gc, err := object(out["generationConfig"])
		if err != nil {
			return nil, fmt.Errorf("gemini: the translated generationConfig: %w", err)
		}
		if _, ok := gc["topK"]; topK && !ok {
			gc["topK"] = from.GenerationConfig.TopK
		}
		if include {
			tc, err := object(gc["thinkingConfig"])
			if err != nil {
				return nil, fmt.Errorf("gemini: the translated thinkingConfig: %w", err)
			}
			_, set := tc["includeThoughts"]
			if b, ok := tc["thinkingBudget"]; !set && !(ok && string(b) == "0") {
				tc["includeThoughts"] = from.GenerationConfig.ThinkingConfig.IncludeThoughts
				if gc["thinkingConfig"], err = json.Marshal(tc); err != nil {
					return nil, err
				}
			}
		}
		var err2 error
		if out["generationConfig"], err2 = json.Marshal(gc); err2 != nil {
			return nil, err2
		}
	}
	return json.Marshal(out)
}

// object reads a JSON object member ({} when absent or null).
func object(v json.RawMessage) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if isNullOrAbsent(v) {
		return m, nil
	}
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, err
	}
	return m, nil
}
